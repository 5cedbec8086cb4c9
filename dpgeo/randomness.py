"""Where dpgeo's randomness comes from: a cryptographically secure stream of 64-bit words.

Every random choice a privacy guarantee depends on (noise, the exponential
mechanism, which empty cells the sparse histogram releases, which points a
person keeps) is made from uniform 64-bit words of a :class:`NoiseSource`.
By default the words are the ChaCha20 keystream (RFC 8439, through the
``cryptography`` package, i.e. OpenSSL) under a 256-bit key read from the
operating system's CSPRNG (:func:`os.urandom`). Without the key the stream
cannot be told from uniform random bits, so an attacker who sees released
values learns nothing about the noise beyond its distribution.

Two other kinds of source exist, and both make the output **not private**
(``source.private`` is ``False`` and ``source.not_private_reason`` says why):

* a fixed test seed (``NoiseSource(seed=7)``): the key is derived from the
  seed, so the stream is reproducible by anyone who knows the seed;
* a caller-supplied :class:`numpy.random.Generator`
  (``NoiseSource.from_generator(gen)``, or passing a Generator where a
  source is expected): numpy's bit generators are statistical, not
  cryptographic.

The samplers (:mod:`dpgeo.noise`) consume words only; the same exact
algorithms run on every kind of source.
"""

from __future__ import annotations

import hashlib
import os

import numpy as np

from .errors import ParameterError

__all__ = ["NoiseSource", "as_source", "check_seed"]

# A ChaCha20 stream is restarted with a fresh nonce after this many bytes,
# far below the 2**38 bytes that OpenSSL's 32-bit block counter can address.
_STREAM_BYTES = 1 << 36
_ZERO_CHUNK = 1 << 20  # bytes of zeros encrypted per call (the keystream is their ciphertext)



def check_seed(seed):
    """Refuse a test seed that is not None or a non-negative integer (before anything is read).

    Examples
    --------
    >>> check_seed(7), check_seed(None)
    (7, None)
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer or None, got {seed!r}: give --seed 0 or more "
                             "(tests only), or no seed for private noise")
    return int(seed)

class NoiseSource:
    """A source of uniform 64-bit words for dpgeo's exact samplers.

    Parameters
    ----------
    seed : int or None
        ``None`` (the default, the only private choice): a ChaCha20 keystream
        keyed with 256 bits from :func:`os.urandom`. A non-negative integer
        derives the key from the seed (SHA-256), for reproducible tests; the
        output is then **not** differentially private.

    Attributes
    ----------
    seeded : bool
        The caller fixed a seed.
    private : bool
        The words come from an unseeded cryptographic generator, so outputs
        made with them may be marked ``differentially_private: true``.
    not_private_reason : str or None
        Why not, in words fit for ``not_private_reasons`` metadata.
    description : str
        Where the words come from, for the ``sampler`` metadata entry.

    Examples
    --------
    >>> src = NoiseSource()
    >>> src.private, src.seeded
    (True, False)
    >>> a, b = NoiseSource(seed=7).words(3), NoiseSource(seed=7).words(3)
    >>> bool((a == b).all()), a.dtype.name
    (True, 'uint64')
    >>> NoiseSource(seed=7).private
    False
    """

    def __init__(self, seed: int | None = None):
        if seed is None:
            key = os.urandom(32)
            self.seeded = False
            self.not_private_reason = None
            self.description = "ChaCha20 CSPRNG keyed from os.urandom"
        else:
            check_seed(seed)
            key = hashlib.sha256(b"dpgeo test seed\x00" + str(int(seed)).encode()).digest()
            self.seeded = True
            self.not_private_reason = "a fixed random seed was used (reproducible noise is for tests only)"
            self.description = "ChaCha20 keyed from a fixed test seed (reproducible, not private)"
        self._key = key
        self._stream = -1
        self._left = 0
        self._enc = None
        self._zeros = bytes(_ZERO_CHUNK)
        self._fill_impl = self._fill_chacha
        self._buf = np.empty(0, dtype=np.uint64)
        self._buf_size = 512

    # -- other kinds of source -------------------------------------------------
    @classmethod
    def from_generator(cls, generator: np.random.Generator) -> NoiseSource:
        """Words from a caller's numpy Generator (for experiments: **not private**).

        Examples
        --------
        >>> src = NoiseSource.from_generator(np.random.default_rng(0))
        >>> src.private, src.not_private_reason.startswith("the noise came from a numpy")
        (False, True)
        """
        if not isinstance(generator, np.random.Generator):
            raise ParameterError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
        self = cls.__new__(cls)
        self.seeded = False
        self.not_private_reason = ("the noise came from a numpy.random.Generator supplied by the caller, "
                                   "which is not a cryptographically secure source")
        self.description = "caller-supplied numpy Generator (not a CSPRNG, not private)"
        self._buf = np.empty(0, dtype=np.uint64)
        self._buf_size = 512

        def fill(out):
            out[...] = generator.integers(0, np.iinfo(np.uint64).max, size=out.size, dtype=np.uint64,
                                          endpoint=True)
        self._fill_impl = fill
        return self

    @classmethod
    def _scripted(cls, words) -> NoiseSource:
        """Test hook: a source that returns exactly ``words``, in order, then fails."""
        words = [int(w) for w in words]
        self = cls.__new__(cls)
        self.seeded = True
        self.not_private_reason = "scripted random words (a test hook)"
        self.description = "scripted words (test hook, not private)"
        self._buf = np.empty(0, dtype=np.uint64)
        self._buf_size = 1  # no read-ahead: every word is consumed exactly when asked for
        self.consumed = 0

        def fill(out):
            n = out.size
            if self.consumed + n > len(words):
                raise RuntimeError(f"scripted source exhausted after {len(words)} words")
            out[...] = np.array(words[self.consumed:self.consumed + n], dtype=np.uint64)
            self.consumed += n
        self._fill_impl = fill
        return self

    # -- properties ------------------------------------------------------------
    @property
    def private(self) -> bool:
        return self.not_private_reason is None

    def __repr__(self):
        return f"NoiseSource({self.description!r})"

    # -- words -----------------------------------------------------------------
    def _next_stream(self):
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

        self._stream += 1
        # 16-byte ChaCha20 IV as OpenSSL takes it: 32-bit block counter, then a 96-bit nonce
        iv = (0).to_bytes(4, "little") + self._stream.to_bytes(12, "little")
        self._enc = Cipher(algorithms.ChaCha20(self._key, iv), mode=None).encryptor()
        self._left = _STREAM_BYTES

    def _fill_chacha(self, out: np.ndarray):
        raw = memoryview(out.view(np.uint8))
        pos, n = 0, len(raw)
        while pos < n:
            if self._left == 0:
                self._next_stream()
            step = min(n - pos, _ZERO_CHUNK, self._left)
            self._enc.update_into(self._zeros[:step], raw[pos:pos + step])
            pos += step
            self._left -= step

    def fill(self, out: np.ndarray) -> None:
        """Fill a contiguous ``uint64`` array with uniform random words, in place."""
        if out.dtype != np.uint64 or not out.flags.c_contiguous:
            raise ValueError("fill needs a C-contiguous uint64 array")
        if out.size:
            self._fill_impl(out.reshape(-1))

    def words(self, n: int) -> np.ndarray:
        """``n`` uniform random 64-bit words (``uint64``)."""
        n = int(n)
        if n <= 64 and self._buf_size > 1:  # small requests: from the read-ahead buffer
            if self._buf.size < n:
                self._buf = self._fresh(self._buf_size)
            out, self._buf = self._buf[:n].copy(), self._buf[n:]
            return out
        return self._fresh(n)

    def _fresh(self, n: int) -> np.ndarray:
        out = np.empty(n, dtype=np.uint64)
        self.fill(out)
        return out

    def word(self) -> int:
        """One uniform random 64-bit word as a Python ``int``."""
        if self._buf.size == 0:
            self._buf = self._fresh(self._buf_size)
        w = int(self._buf[0])
        self._buf = self._buf[1:]
        return w

    def below(self, bound: int) -> int:
        """A uniform integer in ``[0, bound)``, exactly (rejection sampling; any ``bound >= 1``).

        Examples
        --------
        >>> 0 <= NoiseSource(seed=1).below(10**30) < 10**30
        True
        """
        bound = int(bound)
        if bound < 1:
            raise ValueError("bound must be >= 1")
        bits = (bound - 1).bit_length()
        n_words = max(1, -(-bits // 64))
        while True:  # accepts with probability > 1/2 per round
            r = 0
            for _ in range(n_words):
                r = (r << 64) | self.word()
            r >>= 64 * n_words - bits
            if r < bound:
                return r

    def numpy_generator(self) -> np.random.Generator:
        """A numpy Generator seeded with 256 bits of this source, for post-processing only.

        Its draws are not cryptographically secure; use it only where privacy
        does not depend on them (e.g. placing synthetic points in a released
        cell).
        """
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence([self.word() for _ in range(4)])))


def as_source(rng) -> NoiseSource:
    """The :class:`NoiseSource` for an ``rng=`` argument.

    ``None`` gives a fresh private source; a :class:`NoiseSource` is used as
    is; a :class:`numpy.random.Generator` is wrapped
    (:meth:`NoiseSource.from_generator`), which makes the output not private.

    Examples
    --------
    >>> as_source(None).private
    True
    >>> as_source(np.random.default_rng(1)).private
    False
    """
    if rng is None:
        return NoiseSource()
    if isinstance(rng, NoiseSource):
        return rng
    if isinstance(rng, np.random.Generator):
        return NoiseSource.from_generator(rng)
    raise ParameterError("rng must be None, a dpgeo.noise.NoiseSource or a numpy.random.Generator "
                         f"(got {type(rng).__name__}); use dpgeo.noise.NoiseSource() for private output")
