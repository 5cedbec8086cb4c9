"""Who is calling, and how often: tokens checked against SHA-256 hashes, per-analyst rate limits.

The configuration holds only the SHA-256 of each analyst's token. A request's
token is hashed and compared with **every** configured hash by
:func:`hmac.compare_digest` (constant time, and no early exit), so neither the
time of a refusal nor its answer says which hashes exist or how close a guess
was. Tokens are never stored, logged or echoed.

The token travels as ``Authorization: Bearer TOKEN`` or, for clients that
know only HTTP Basic (QGIS 3.22's authentication methods, a browser's login
dialog), as the password of ``Authorization: Basic`` with any user name.

Examples
--------
>>> import base64
>>> token, digest = new_token()
>>> auth = Authenticator({"alice": digest})
>>> auth.analyst(f"Bearer {token}")
'alice'
>>> auth.analyst("Basic " + base64.b64encode(f"alice:{token}".encode()).decode())
'alice'
>>> auth.analyst("Bearer wrong") is None
True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time

__all__ = ["Authenticator", "RateLimiter", "hash_token", "new_token", "token_of"]

#: Longest Authorization header value looked at (a token is 43 characters; more is not a token).
MAX_HEADER_CHARS = 512


def hash_token(token: str) -> str:
    """SHA-256 hex digest of a token (what the configuration stores).

    Examples
    --------
    >>> hash_token("correct horse")[:16]
    '4104d36f8da2c254'
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str]:
    """A fresh token (256 random bits, URL-safe text) and its SHA-256 hex digest."""
    token = secrets.token_urlsafe(32)
    return token, hash_token(token)


class Authenticator:
    """Maps a bearer token to its analyst by comparing hashes in constant time.

    Parameters
    ----------
    hashes : dict
        ``{analyst name: SHA-256 hex digest of their token}``.
    """

    def __init__(self, hashes: dict):
        self._hashes = [(name, bytes.fromhex(h)) for name, h in sorted(hashes.items())]

    def analyst(self, authorization: str | None):
        """The analyst whose token the ``Authorization`` header carries, or None.

        ``Bearer <token>``, or ``Basic <base64 of user:token>`` (the user name
        is not used: the token says who it is). Every configured hash is
        compared, whatever matched first.
        """
        token = token_of(authorization)
        if not token:
            return None
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found = None
        for name, h in self._hashes:
            if hmac.compare_digest(digest, h) and found is None:
                found = name
        return found


def token_of(authorization: str | None):
    """The token an ``Authorization`` header carries (Bearer, or the password of Basic), or None.

    Examples
    --------
    >>> token_of("Bearer abc"), token_of("Basic dXNlcjphYmM="), token_of("Basic abc"), token_of("Digest x")
    ('abc', 'abc', None, None)
    """
    if not authorization or len(authorization) > MAX_HEADER_CHARS:
        return None
    scheme, _, value = authorization.partition(" ")
    value = value.strip()
    scheme = scheme.lower()
    if scheme == "bearer":
        return value or None
    if scheme != "basic" or not value:
        return None
    try:
        user_pass = base64.b64decode(value, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    _, sep, password = user_pass.partition(":")
    return password if sep and password else None


class RateLimiter:
    """A token bucket per key: at most ``per_minute`` events a minute, in bursts of at most ``burst``.

    Examples
    --------
    >>> rl = RateLimiter(per_minute=2, burst=2)
    >>> [rl.allow("alice") for _ in range(3)]
    [True, True, False]
    >>> rl.allow("bob")
    True
    """

    def __init__(self, per_minute: int, burst: int | None = None, clock=time.monotonic):
        self.rate = per_minute / 60.0
        self.burst = float(burst if burst is not None else per_minute)
        self._clock = clock
        self._state = {}
        self._lock = threading.Lock()

    def allow(self, key) -> bool:
        """Take one event from ``key``'s bucket; False when it is empty."""
        now = self._clock()
        with self._lock:
            level, last = self._state.get(key, (self.burst, now))
            level = min(self.burst, level + (now - last) * self.rate)
            if level < 1.0:
                self._state[key] = (level, now)
                return False
            self._state[key] = (level - 1.0, now)
            return True

    def retry_after(self, key) -> int:
        """Whole seconds until ``key`` may send again (at least 1)."""
        with self._lock:
            level, _ = self._state.get(key, (self.burst, 0.0))
        return max(1, int((1.0 - level) / self.rate + 0.999))
