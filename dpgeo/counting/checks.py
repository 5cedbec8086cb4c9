"""What was read, and whether the input *as a whole* is usable.

One bad record never stops a run: it is dropped and counted
(:mod:`~dpgeo.counting.decode`). What is an error, in the owner's mode, is
a problem of the whole input: no record at all, no usable point, most
coordinates out of the longitude/latitude range (projected coordinates read
as lon/lat, or the two columns exchanged), most geometries not points.
:class:`InputTally` adds up the batches and :meth:`InputTally.problems`
names those problems, from counts only: the messages name the input, its
columns and counts, never a value of a record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .decode import PointBatch, add_drops, describe_drops

__all__ = ["InputTally"]

#: Share of the records above which a kind of bad record makes the input unusable as a whole.
WHOLE_INPUT_SHARE = 0.5
#: The first batch alone decides when it has at least this many records and this share is bad.
EARLY_MIN_RECORDS = 10_000
EARLY_SHARE = 0.9

#: What every owner-only message about the private data says of itself (errors, warnings, the owner log).
OWNER_LABEL = "exact, not private: do not publish"


def for_owner(message: str) -> str:
    """``message`` (a fact about the private data, for its owner only) with the owner-only label."""
    return f"{message} ({OWNER_LABEL})"


@dataclass
class InputTally:
    """Running totals of the records read (owner-only facts about the private input)."""

    label: str = ""
    columns: tuple | None = None
    n_read: int = 0
    n_points: int = 0
    drops: dict = field(default_factory=dict)
    n_swap_plausible: int = 0
    non_point_kinds: set = field(default_factory=set)
    n_batches: int = 0

    def add(self, b: PointBatch):
        self.n_read += b.n_read
        self.n_points += int(b.x.size)
        add_drops(self.drops, b.drops)
        self.n_swap_plausible += b.n_swap_plausible
        self.non_point_kinds |= b.non_point_kinds
        self.n_batches += 1

    def merge(self, other: "InputTally"):
        self.n_read += other.n_read
        self.n_points += other.n_points
        add_drops(self.drops, other.drops)
        self.n_swap_plausible += other.n_swap_plausible
        self.non_point_kinds |= other.non_point_kinds
        self.n_batches += other.n_batches
        return self

    @property
    def n_dropped(self) -> int:
        return int(sum(self.drops.values()))

    def diagnostics(self) -> dict:
        return {"n_read": self.n_read, "n_dropped_invalid": self.n_dropped,
                "dropped_by_reason": dict(sorted(self.drops.items()))}

    def _where(self):
        if self.columns:
            return f"columns {self.columns[0]!r}/{self.columns[1]!r} of {self.label}"
        return str(self.label)

    def problems(self, *, early=False) -> list[str]:
        """Whole-input problems (empty when the input is usable).

        With ``early`` (after the first batch only), only overwhelming
        evidence counts: at least :data:`EARLY_MIN_RECORDS` records of which
        :data:`EARLY_SHARE` are out of range or not points.
        """
        if early and self.n_read < EARLY_MIN_RECORDS:
            return []
        share = EARLY_SHARE if early else WHOLE_INPUT_SHARE
        out = []
        d = self.drops
        lon_bad, lat_bad = d.get("lon_out_of_range", 0), d.get("lat_out_of_range", 0)
        located = self.n_points + lon_bad + lat_bad
        if not early and self.n_read == 0:
            return [f"{self.label} has no records"]
        if located and lon_bad + lat_bad > share * located:
            n = lon_bad + lat_bad
            if self.n_swap_plausible > WHOLE_INPUT_SHARE * n:
                fix = ("name them the other way round with --x LONGITUDE_COLUMN --y LATITUDE_COLUMN"
                       if self.columns else "fix the axis order of the file")
                out.append(f"{self._where()}: looks like lat/lon swapped ({self.n_swap_plausible:,} of {located:,} "
                           f"records have a latitude beyond ±90 that would be a valid longitude); {fix}")
            elif lon_bad == 0:
                out.append(f"{self._where()}: {lat_bad:,} of {located:,} records have a latitude beyond ±90; "
                           "check the latitude column (or give --input-crs if these are projected coordinates)")
            else:
                out.append(f"{self._where()} hold values outside the longitude/latitude range in {n:,} of "
                           f"{located:,} records ({lon_bad:,} longitudes beyond ±180, {lat_bad:,} latitudes beyond "
                           "±90); if they are projected coordinates give --input-crs (e.g. --input-crs EPSG:26915)")
        n_unparsed = d.get("unparsed_time", 0)
        timed = self.n_points + n_unparsed + d.get("time_outside_bounds", 0)
        if timed and n_unparsed > share * timed:
            out.append(f"{self.label}: {n_unparsed:,} of {timed:,} records have a time that does not read as one "
                       "(read: ISO 8601 text, year first, such as 2014-04-01T00:11:00 or 2014/4/1 00:11 with an "
                       "optional zone; epoch seconds; timestamps); give its format with --time-format (time_format=), "
                       "e.g. '%m/%d/%Y %H:%M:%S'")
        n_np = d.get("non_point", 0)
        if self.n_read and n_np > share * self.n_read:
            kinds = ", ".join(sorted(self.non_point_kinds)) or "non-point"
            hint = (" (split multipoints into one point per row, and if one person can have several points "
                    "set --max-points-per-record)") if "MultiPoint" in self.non_point_kinds else ""
            out.append(f"{n_np:,} of {self.n_read:,} records of {self.label} have {kinds} geometries; dpgeo needs "
                       f"a layer of points{hint}")
        if not early and not out and self.n_points == 0:
            out.append(f"{self.label} has no usable points ({self.n_read:,} records read; dropped: "
                       f"{describe_drops(self.drops)})")
        return out
