"""The H3 grid's geometry in numpy: longitude/latitude to icosahedron face and hex lattice coordinates, and back.

H3 (https://h3geo.org) places a hexagon lattice on the gnomonic projection of
each of the 20 faces of an icosahedron. ``latLngToCell`` is the composition of

1. *face and hex2d*: the point's closest face ``f`` (by the squared distance
   of unit vectors to the face centres) and its gnomonic coordinates on
   ``f``, scaled to the lattice of the resolution (``_vec3ToHex2d``);
2. *lattice cell*: the hexagon of that lattice containing the point
   (``_hex2dToCoordIJK``), i.e. integer coordinates ``(i, j, k)``;
3. *index*: ``_faceIjkToH3(f, ijk)``, a function of ``(f, ijk)`` alone (it
   walks the digits up to the base cell and applies the base cell's
   rotations).

This module implements steps 1–2 vectorised, replicating H3's formulas and
their order of floating-point operations, and their inverse for lattice
centres and corners. Step 3 is never re-implemented: :mod:`dpgeo.h3cells`
asks the ``h3ronpy`` library for the index of one interior point of each
lattice cell of the study area, which is exactly ``_faceIjkToH3(f, ijk)``.
Each point also gets a *margin*: how far it lies from the edge of its face
region and of its lattice hexagon. A point whose margin is below a tolerance
far above floating-point error (where this module and H3's C code could round
differently) is sent to ``h3ronpy`` itself, so the result is exactly H3's.

Constants from H3 4.x (``src/h3lib/lib/faceijk.c``, ``constants.h``),
Copyright Uber Technologies, Inc., Apache License 2.0.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lonlat_to_vec3", "vec3_to_face_hex2d", "hex2d_to_axial", "axial_to_hex2d", "hex2d_to_vec3",
           "vec3_to_lonlat", "FACE_CENTRES", "is_class_iii", "FaceProjector", "lonlat_to_p", "corner_hex2d",
           "CORNERS_3AXIAL"]

#: Icosahedron face centres on the unit sphere (H3 ``faceCenterPoint``).
FACE_CENTRES = np.array([
    [0.2199307791404606, 0.6583691780274996, 0.7198475378926182],
    [-0.2139234834501421, 0.1478171829550703, 0.9656017935214205],
    [0.1092625278784797, -0.4811951572873210, 0.8697775121287253],
    [0.7428567301586791, -0.3593941678278028, 0.5648005936517033],
    [0.8112534709140969, 0.3448953237639384, 0.4721387736413930],
    [-0.1055498149613921, 0.9794457296411413, 0.1718874610009365],
    [-0.8075407579970092, 0.1533552485898818, 0.5695261994882688],
    [-0.2846148069787907, -0.8644080972654206, 0.4144792552473539],
    [0.7405621473854482, -0.6673299564565524, -0.0789837646326737],
    [0.8512303986474293, 0.4722343788582681, -0.2289137388687808],
    [-0.7405621473854481, 0.6673299564565524, 0.0789837646326737],
    [-0.8512303986474292, -0.4722343788582682, 0.2289137388687808],
    [0.1055498149613919, -0.9794457296411413, -0.1718874610009365],
    [0.8075407579970092, -0.1533552485898819, -0.5695261994882688],
    [0.2846148069787908, 0.8644080972654204, -0.4144792552473539],
    [-0.7428567301586791, 0.3593941678278027, -0.5648005936517033],
    [-0.8112534709140971, -0.3448953237639382, -0.4721387736413930],
    [-0.2199307791404607, -0.6583691780274996, -0.7198475378926182],
    [0.2139234834501420, -0.1478171829550704, -0.9656017935214205],
    [-0.1092625278784796, 0.4811951572873210, -0.8697775121287253],
])
#: Azimuth (radians) from each face centre to its lattice's i axis (H3 ``faceAxesAzRadsCII[f][0]``).
FACE_AXIS_AZ = np.array([
    5.619958268523939882, 5.760339081714187279, 0.780213654393430055, 0.430469363979999913,
    6.130269123335111400, 2.692877706530642877, 2.982963003477243874, 3.532912002790141181,
    3.494305004259568154, 3.003214169499538391, 5.930472956509811562, 0.138378484090254847,
    0.448714947059150361, 0.158629650112549365, 5.891865957979238535, 2.711123289609793325,
    3.294508837434268316, 3.804819692245439833, 3.664438879055192436, 2.361378999196363184,
])
M_SQRT7 = 2.6457513110645905905016157536392604257102
M_RSQRT7 = 0.37796447300922722721451653623418006081576
M_2PI = 6.28318530717958647692528676655900576839433
M_SQRT3_2 = 0.8660254037844386467637231707529361834714
M_RSIN60 = 1.1547005383792515290182975610039149112953
M_AP7_ROT_RADS = 0.333473172251832115336090755351601070065900389
RES0_U_GNOMONIC = 0.38196601125010500003
INV_RES0_U_GNOMONIC = 2.61803398874989588842
EPSILON = 0.0000000000000001


def is_class_iii(res: int) -> bool:
    """Odd resolutions are H3's Class III (lattice rotated by ``asin(√3/(2√7))``)."""
    return res % 2 == 1


def _pos_angle(r):
    """H3 ``_posAngleRads``: an angle in [0, 2π) (for inputs in (-2π, 4π))."""
    out = np.where(r < 0.0, r + M_2PI, r)
    return np.where(r >= M_2PI, out - M_2PI, out)


def _tangent_basis(face):
    """North and east unit vectors of the tangent plane at each face centre (H3 ``_vec3TangentBasis``)."""
    c = FACE_CENTRES[face]
    pole = np.array([0.0, 0.0, 1.0])
    north = pole - (c @ pole)[..., None] * c
    north = north / np.sqrt((north * north).sum(-1))[..., None]
    east = np.cross(north, c)
    return north, east


_NORTH, _EAST = _tangent_basis(np.arange(20))


def lonlat_to_vec3(lon_deg, lat_deg):
    """Unit vectors ``(x, y, z)`` of longitude/latitude in degrees (H3 ``latLngToVec3``)."""
    lat = np.radians(np.asarray(lat_deg, dtype=np.float64))
    lng = np.radians(np.asarray(lon_deg, dtype=np.float64))
    r = np.cos(lat)
    return np.cos(lng) * r, np.sin(lng) * r, np.sin(lat)


def lonlat_to_p(lon_deg, lat_deg) -> np.ndarray:
    """Unit vectors of longitude/latitude in degrees as an ``(n, 3)`` array."""
    lat = np.radians(np.asarray(lat_deg, dtype=np.float64))
    lng = np.radians(np.asarray(lon_deg, dtype=np.float64))
    p = np.empty((lat.size, 3))
    r = np.cos(lat)
    np.multiply(np.cos(lng), r, out=p[:, 0])
    np.multiply(np.sin(lng), r, out=p[:, 1])
    np.sin(lat, out=p[:, 2])
    return p


def vec3_to_lonlat(x, y, z):
    """Longitude/latitude in degrees of unit vectors."""
    return np.degrees(np.arctan2(y, x)), np.degrees(np.arcsin(np.clip(z, -1.0, 1.0)))


def vec3_to_face_hex2d(x, y, z, res: int, faces=None):
    """Closest face, hex2d coordinates on it at ``res``, and the face margin (H3 ``_vec3ToHex2d``).

    Parameters
    ----------
    x, y, z : numpy.ndarray
        Unit vectors.
    res : int
        H3 resolution 0–15.
    faces : sequence of int, optional
        The faces to consider (all 20 by default). Callers pass the faces
        whose region meets their study area, for points known to lie in its
        bounding box.

    Returns
    -------
    face : numpy.ndarray of int8
    hx, hy : numpy.ndarray
        Coordinates in the face's hex2d plane (lattice spacing 1).
    face_margin : numpy.ndarray
        Squared distance to the second-closest considered face minus that to
        the closest (0 when only one face is considered).
    """
    faces = np.arange(20) if faces is None else np.asarray(faces, dtype=np.int64)
    n = np.asarray(x).size
    best = np.full(n, 5.0)
    second = np.full(n, 5.0)
    face = np.zeros(n, dtype=np.int8)
    for f in faces.tolist():
        c = FACE_CENTRES[f]
        dx = c[0] - x
        dy = c[1] - y
        dz = c[2] - z
        sqd = dx * dx + dy * dy + dz * dz  # H3 vec3DistSq
        closer = sqd < best
        second = np.where(closer, best, np.minimum(second, sqd))
        best = np.where(closer, sqd, best)
        face[closer] = f
    margin = second - best if faces.size > 1 else np.full(n, np.inf)
    r = np.arccos(1 - best * 0.5)
    fi = face.astype(np.int64)
    c = FACE_CENTRES[fi]
    # azimuth from the face centre to the point (H3 _vec3AzimuthRads)
    pdotc = x * c[:, 0] + y * c[:, 1] + z * c[:, 2]
    px = x - pdotc * c[:, 0]
    py = y - pdotc * c[:, 1]
    pz = z - pdotc * c[:, 2]
    norm = np.sqrt(px * px + py * py + pz * pz)
    with np.errstate(invalid="ignore", divide="ignore"):
        px, py, pz = px / norm, py / norm, pz / norm
    e, no = _EAST[fi], _NORTH[fi]
    az = np.arctan2(px * e[:, 0] + py * e[:, 1] + pz * e[:, 2], px * no[:, 0] + py * no[:, 1] + pz * no[:, 2])
    theta = _pos_angle(FACE_AXIS_AZ[fi] - _pos_angle(az))
    if is_class_iii(res):
        theta = _pos_angle(theta - M_AP7_ROT_RADS)
    r = np.tan(r)
    r *= INV_RES0_U_GNOMONIC
    for _ in range(res):
        r *= M_SQRT7
    hx = r * np.cos(theta)
    hy = r * np.sin(theta)
    at_centre = best < 4 * EPSILON * EPSILON  # r < EPSILON (the face centre itself)
    hx[at_centre] = 0.0
    hy[at_centre] = 0.0
    hx[~np.isfinite(hx)] = 0.0
    hy[~np.isfinite(hy)] = 0.0
    return face, hx, hy, margin


def hex2d_to_axial(hx, hy):
    """The lattice hexagon containing each hex2d point, as axial ``(a, b) = (i - k, j - k)``, and its margin.

    The hexagons are the Voronoi cells of the centres ``(a - b/2, b·√3/2)``
    (H3 ``_ijkToHex2d``); the nearest centre is found by cube rounding. The
    margin is ``0.5 - max_u |d·u|`` over the three neighbour directions ``u``
    (``d`` the offset from the centre): the distance to the hexagon's nearest
    side in lattice units; a point on a side has margin 0, and H3's own
    rounding (``_hex2dToCoordIJK``) decides it.
    """
    hx = np.asarray(hx, dtype=np.float64)
    hy = np.asarray(hy, dtype=np.float64)
    rf = hy * M_RSIN60
    qf = hx - 0.5 * rf
    sf = -qf - rf
    rq, rr, rs = np.rint(qf), np.rint(rf), np.rint(sf)
    dq, dr, ds = np.abs(rq - qf), np.abs(rr - rf), np.abs(rs - sf)
    fix_q = (dq > dr) & (dq > ds)
    fix_r = ~fix_q & (dr > ds)
    rq = np.where(fix_q, -rr - rs, rq)
    rr = np.where(fix_r, -rq - rs, rr)
    b = rr
    a = rq + rr
    dx = hx - (a - 0.5 * b)
    dy = hy - b * M_SQRT3_2
    sy = M_SQRT3_2 * dy
    hdx = 0.5 * dx
    m = np.maximum(np.abs(dx), np.maximum(np.abs(hdx + sy), np.abs(sy - hdx)))
    return a.astype(np.int64), b.astype(np.int64), 0.5 - m


class FaceProjector:
    """Closest face and hex2d coordinates of many points at one resolution, among a few candidate faces.

    The gnomonic projection of H3 (``_vec3ToHex2d``: ``r = acos(p·c)``,
    azimuth from the face's i axis, ``tan r`` scaled by the resolution) is
    linear in the unit vector ``p``: ``x = p·u_f / p·c_f``, ``y = p·v_f / p·c_f``
    with ``u_f = K(cos A·north + sin A·east)``, ``v_f = K(sin A·north - cos A·east)``,
    ``A`` the face's i-axis azimuth (less the Class III rotation) and ``K`` the
    resolution's scale. One matrix product gives every candidate face's three
    dot products.
    """

    def __init__(self, res: int, faces=None):
        self.res = int(res)
        self.faces = np.arange(20) if faces is None else np.asarray(faces, dtype=np.int64)
        k = INV_RES0_U_GNOMONIC
        for _ in range(self.res):
            k *= M_SQRT7
        self.scale = k
        az = FACE_AXIS_AZ[self.faces] - (M_AP7_ROT_RADS if is_class_iii(self.res) else 0.0)
        ca, sa = np.cos(az)[:, None], np.sin(az)[:, None]
        no, e = _NORTH[self.faces], _EAST[self.faces]
        u = k * (ca * no + sa * e)
        v = k * (sa * no - ca * e)
        nf = self.faces.size
        self.matrix = np.concatenate([FACE_CENTRES[self.faces].T, u.T, v.T], axis=1)  # (3, 3 nf)
        self.nf = nf
        self._u_inv = u / (k * k)  # the inverse: p ∝ c + x·u/K² + y·v/K²
        self._v_inv = v / (k * k)
        self._slot = np.full(20, -1, dtype=np.int64)
        self._slot[self.faces] = np.arange(nf)

    def unproject(self, face, hx, hy):
        """Unit vectors ``(..., 3)`` of hex2d points ``(hx, hy)`` (shape ``(n, ...)``) on faces ``face`` (``(n,)``).

        The inverse of :meth:`project` (the gnomonic projection is linear in
        the point: ``p ∝ c_f + hx·u_f/K² + hy·v_f/K²``), without trigonometry;
        the same point as H3's ``_hex2dToGeo`` to about 1e-15.
        """
        hx = np.asarray(hx, dtype=np.float64)
        hy = np.asarray(hy, dtype=np.float64)
        slot = self._slot[np.asarray(face, dtype=np.int64)]
        shape = (slot.size,) + (1,) * (hx.ndim - 1) + (3,)
        c = FACE_CENTRES[self.faces][slot].reshape(shape)
        u = self._u_inv[slot].reshape(shape)
        v = self._v_inv[slot].reshape(shape)
        p = hx[..., None] * u
        p += hy[..., None] * v
        p += c
        p /= np.sqrt(np.einsum("...i,...i->...", p, p))[..., None]
        return p

    def project(self, p):
        """``(face, hx, hy, face_margin, tol)`` of unit vectors ``p`` (an ``(n, 3)`` array).

        ``face_margin`` is the squared-distance gap between the closest and the
        second-closest candidate face; ``tol`` the margin (lattice units) below
        which a point is too close to a hexagon side to trust either
        implementation's floating point (it grows near a face centre, where
        H3's ``acos(1 - sqd/2)`` loses precision).
        """
        d = p @ self.matrix
        nf = self.nf
        dots = d[:, :nf]
        k = np.argmax(dots, axis=1) if nf > 1 else np.zeros(len(p), dtype=np.int64)
        rows = np.arange(len(p))
        dbest = dots[rows, k]
        if nf > 1:
            dots[rows, k] = -np.inf
            margin = 2.0 * (dbest - dots.max(axis=1))
        else:
            margin = np.full(len(p), np.inf)
        hx = d[rows, nf + k] / dbest
        hy = d[rows, 2 * nf + k] / dbest
        rho = np.abs(hx) + np.abs(hy)
        with np.errstate(divide="ignore"):
            tol = 1e-7 + 1e-12 * rho + self.scale * self.scale * 1e-15 / rho
        return self.faces[k].astype(np.int8), hx, hy, margin, tol


def _face_neighbours():
    d = FACE_CENTRES @ FACE_CENTRES.T
    np.fill_diagonal(d, -np.inf)
    return np.argsort(-d, axis=1)[:, :3]


#: The three faces that share an edge with each face (the face's region is bounded by its bisectors with them).
FACE_NEIGHBOURS = _face_neighbours()


def face_margin(p, face):
    """How far unit vectors ``p`` (``(n, ..., 3)``) lie inside the region of ``face`` (``(n,)``): the least of
    ``p·(c_f - c_g)`` over the three faces ``g`` that share an edge with it (negative: outside)."""
    face = np.asarray(face, dtype=np.int64)
    shape = (face.size,) + (1,) * (p.ndim - 2) + (3,)
    c = FACE_CENTRES[face]
    out = None
    for j in range(3):
        d = (c - FACE_CENTRES[FACE_NEIGHBOURS[face, j]]).reshape(shape)
        m = np.einsum("...i,...i->...", p, np.broadcast_to(d, p.shape))
        out = m if out is None else np.minimum(out, m)
    return out


def axial_to_hex2d(a, b):
    """Centres of lattice hexagons ``(a, b)`` in hex2d coordinates (H3 ``_ijkToHex2d``)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return a - 0.5 * b, b * M_SQRT3_2


#: The six corners of a lattice hexagon as three times their axial offset from its centre, counter-clockwise
#: from 30° in hex2d: each corner is the mean of the three hexagons around it (a third of a lattice step).
CORNERS_3AXIAL = np.array([(2, 1), (1, 2), (-1, 1), (-2, -1), (-1, -2), (1, -1)], dtype=np.int64)


def corner_hex2d(a, b):
    """hex2d coordinates of the six corners of lattice hexagons ``(a, b)``: two ``(n, 6)`` arrays.

    A corner is computed from its integer coordinates in thirds of the
    lattice, ``(3a + da, 3b + db)``, so the hexagons that share it get the same
    floating-point value, bit for bit (their union has no slivers). These are
    the vertices of H3's ``cellToBoundary`` for a cell whose corners all lie on
    its centre's face (the hexagon is the set of points ``latLngToCell`` puts in
    the cell: the Voronoi cell of its centre in the face's lattice).

    Examples
    --------
    >>> hx, hy = corner_hex2d(np.array([0]), np.array([0]))
    >>> np.round(np.hypot(hx, hy), 6).tolist()  # 1/√3 from the centre
    [[0.57735, 0.57735, 0.57735, 0.57735, 0.57735, 0.57735]]
    """
    a = np.asarray(a, dtype=np.int64).reshape(-1, 1)
    b = np.asarray(b, dtype=np.int64).reshape(-1, 1)
    big_a = (3 * a + CORNERS_3AXIAL[:, 0]).astype(np.float64)
    big_b = (3 * b + CORNERS_3AXIAL[:, 1]).astype(np.float64)
    return (big_a - 0.5 * big_b) / 3.0, big_b * M_SQRT3_2 / 3.0


def hex2d_to_vec3(hx, hy, face, res: int):
    """Unit vectors of hex2d points on ``face`` at ``res`` (H3 ``_hex2dToVec3``, not a substrate grid)."""
    hx = np.asarray(hx, dtype=np.float64)
    hy = np.asarray(hy, dtype=np.float64)
    face = np.broadcast_to(np.asarray(face, dtype=np.int64), hx.shape)
    r = np.sqrt(hx * hx + hy * hy)
    theta = np.arctan2(hy, hx)
    for _ in range(res):
        r = r * M_RSQRT7
    r = r * RES0_U_GNOMONIC
    r = np.arctan(r)
    if is_class_iii(res):
        theta = _pos_angle(theta + M_AP7_ROT_RADS)
    theta = _pos_angle(FACE_AXIS_AZ[face] - theta)
    no, e, c = _NORTH[face], _EAST[face], FACE_CENTRES[face]
    ct, st = np.cos(theta)[..., None], np.sin(theta)[..., None]
    d = ct * no + st * e
    v = np.cos(r)[..., None] * c + np.sin(r)[..., None] * d
    v = v / np.sqrt((v * v).sum(-1))[..., None]
    return v[..., 0], v[..., 1], v[..., 2]
