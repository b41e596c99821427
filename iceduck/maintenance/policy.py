"""A table's maintenance policy, read from its table properties, and the rules that apply it.

Everything here is pure: the properties come in as a mapping and the instant as an argument
(milliseconds since the epoch), so every rule can be tested with a fake clock. The properties
(`POLICY_PROPERTIES` holds names, defaults and meanings; README "Maintenance as a loop" lists them):

* retention: Iceberg's `history.expire.min-snapshots-to-keep`, `history.expire.max-snapshot-age-ms`
  and `history.expire.max-ref-age-ms`, plus `iceduck.retention.min-reader-age`: the longest a
  reader, a writer or a recovery may need an old snapshot. Nothing younger than that expires,
  whatever the other settings say (the retention floor);
* rewrites: `write.target-file-size-bytes`, `iceduck.maintenance.rewrite.sort-order` (a sort order
  makes rewrites sort; else the table's own sort order, else bin-pack);
* `iceduck.maintenance.auto`: which actions the loop may run on its own;
* `iceduck.maintenance.window` (+ `.timezone`): when it may run them;
* budgets `iceduck.maintenance.budget.*`: bytes rewritten and commits per rolling hour, file groups
  and delete requests per run;
* `iceduck.maintenance.max-commit-failure-rate`: above it (over the last day's runs, at least
  `COMMIT_FAILURE_MIN_RUNS` of them) the loop stops committing to the table.

Iceberg's own properties keep Iceberg's form (whole milliseconds, bytes: other engines read them
too). iceduck's durations take a unit (`90d`, `6h`, `30m`, `10s`, `500ms`; a bare number is
milliseconds), its sizes too (`256MB`, `1GB`; a bare number is bytes). A value that does not parse is an error naming the
property: the loop then runs nothing on that table rather than guess.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from iceduck.errors import ValidationError

HOUR_MS = 60 * 60 * 1000
DAY_MS = 24 * HOUR_MS

# The actions, in the order the loop runs them on one table: compaction first (it leaves replaced
# files that only expiry frees), manifests after it (a rewrite rewrites manifests with removed
# entries), expiry before orphan removal (expiry deletes what it unlinks itself; an orphan scan
# before it would list those files as orphans and race the expiry's own deletes).
REWRITE_DATA = "rewrite_data_files"
REWRITE_MANIFESTS = "rewrite_manifests"
EXPIRE = "expire_snapshots"
ORPHANS = "remove_orphan_files"
ACTION_ORDER = (REWRITE_DATA, REWRITE_MANIFESTS, EXPIRE, ORPHANS)
_ACTION_NAMES = {
    "rewrite_data_files": REWRITE_DATA, "rewrite-data": REWRITE_DATA, "rewrite_data": REWRITE_DATA,
    "compact": REWRITE_DATA,
    "rewrite_manifests": REWRITE_MANIFESTS, "rewrite-manifests": REWRITE_MANIFESTS, "manifests": REWRITE_MANIFESTS,
    "expire_snapshots": EXPIRE, "expire": EXPIRE, "expire-snapshots": EXPIRE,
    "remove_orphan_files": ORPHANS, "orphans": ORPHANS, "remove-orphan-files": ORPHANS,
}  # fmt: skip

MIN_SNAPSHOTS = "history.expire.min-snapshots-to-keep"
MAX_SNAPSHOT_AGE = "history.expire.max-snapshot-age-ms"
MAX_REF_AGE = "history.expire.max-ref-age-ms"
MIN_READER_AGE = "iceduck.retention.min-reader-age"
TARGET_FILE_SIZE = "write.target-file-size-bytes"
SORT_ORDER = "iceduck.maintenance.rewrite.sort-order"
AUTO = "iceduck.maintenance.auto"
WINDOW = "iceduck.maintenance.window"
WINDOW_TZ = "iceduck.maintenance.window.timezone"
BUDGET_REWRITE_BYTES = "iceduck.maintenance.budget.rewrite-bytes-per-hour"
BUDGET_COMMITS = "iceduck.maintenance.budget.commits-per-hour"
BUDGET_FILE_GROUPS = "iceduck.maintenance.budget.file-groups-per-run"
BUDGET_DELETES = "iceduck.maintenance.budget.delete-requests-per-run"
MAX_FAILURE_RATE = "iceduck.maintenance.max-commit-failure-rate"
ORPHAN_AGE = "iceduck.maintenance.orphans.older-than"
DEFAULT_ORPHAN_AGE_MS = 3 * 24 * 3600_000
COMMIT_FAILURE_MIN_RUNS = 4

# (property, default as text, meaning): the documented policy (README and `iceduck maintain --help`).
POLICY_PROPERTIES: tuple[tuple[str, str, str], ...] = (
    (MIN_SNAPSHOTS, "1", "snapshots each branch keeps whatever their age"),
    (MAX_SNAPSHOT_AGE, "432000000 (5 days)", "snapshots older than this (ms) may expire"),
    (MAX_REF_AGE, "forever", "branches and tags (not main) older than this (ms) are removed"),
    (MIN_READER_AGE, "1h", "retention floor: nothing younger than this ever expires"),
    (TARGET_FILE_SIZE, "536870912 (512 MB)", "data file size rewrites aim at, bytes"),
    (SORT_ORDER, "the table's sort order", "order rewrites write in (a sort order makes them sort)"),
    (AUTO, "rewrite_data_files,rewrite_manifests,expire_snapshots", "actions the loop runs by itself ('all', 'none')"),
    (WINDOW, "always", "when the loop may run: 'mon-fri 22:00-06:00; sat,sun' (ranges start on the named days)"),
    (WINDOW_TZ, "UTC", "time zone of the window"),
    (BUDGET_REWRITE_BYTES, "unlimited", "data and manifest bytes rewritten per rolling hour"),
    (BUDGET_COMMITS, "unlimited", "maintenance commits per rolling hour"),
    (BUDGET_FILE_GROUPS, "unlimited", "file groups one run rewrites"),
    (BUDGET_DELETES, "unlimited", "file delete requests one run makes"),
    (MAX_FAILURE_RATE, "0.5", "failed or conflicting runs per run over the last day: above it, no commits"),
    (ORPHAN_AGE, "3d", "orphan removal deletes only unreferenced files older than this (at least 1h)"),
)  # fmt: skip

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d|w)?\s*$", re.IGNORECASE)
_DURATION_MS = {
    None: 1,
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": HOUR_MS,
    "d": DAY_MS,
    "w": 7 * DAY_MS,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb|tb|kib|mib|gib|tib)?\s*$", re.IGNORECASE)
_SIZE_BYTES = {None: 1, "b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}  # fmt: skip
_UNLIMITED = ("", "unlimited", "none", "-1")


def parse_duration_ms(text: str, what: str) -> int:
    """`90d`, `6h`, `30m`, `10s`, `500ms` or a bare number of milliseconds, as milliseconds."""
    return _amount(_DURATION, _DURATION_MS, text, f"{what} must be a duration like 90d, 6h, 30m or milliseconds")


def parse_size(text: str, what: str) -> int:
    """`256MB`, `1GB` or a bare number of bytes, as bytes (KB = 1024 bytes)."""
    return _amount(_SIZE, _SIZE_BYTES, text, f"{what} must be a size like 256MB, 1GB or bytes")


def _amount(pattern: re.Pattern[str], units: Mapping[str | None, int], text: str, expected: str) -> int:
    """A number with an optional unit (`pattern`'s two groups) in the base unit; `expected` says
    what was wanted when `text` is not one."""
    m = pattern.match(text)
    if m is None:
        raise ValidationError(f"{expected}, not {text!r}")
    unit = m.group(2).lower() if m.group(2) else None
    return int(float(m.group(1)) * units[unit])


def action_name(text: str) -> str:
    """The action an (abbreviated) name means: `expire` -> `expire_snapshots`, ..."""
    found = _ACTION_NAMES.get(text.strip().lower())
    if found is None:
        raise ValidationError(
            f"unknown maintenance action {text.strip()!r} (one of {', '.join(ACTION_ORDER)}, or all / none)"
        )
    return found


def parse_actions(text: str, what: str = AUTO) -> frozenset[str]:
    """A comma-separated action list; `all` and `none` as words."""
    words = [w.strip() for w in text.split(",") if w.strip()]
    if [w.lower() for w in words] in (["none"], []):
        return frozenset()
    if [w.lower() for w in words] == ["all"]:
        return frozenset(ACTION_ORDER)
    try:
        return frozenset(action_name(w) for w in words)
    except ValidationError as e:
        raise ValidationError(f"{what}: {e}") from None


# -- windows ------------------------------------------------------------------------------------------

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_RANGE = re.compile(r"^(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})$")


@dataclass(frozen=True, slots=True)
class WindowRange:
    """Open from `start` to `end` (minutes after local midnight) on `days` (0 = Monday); an end at or
    before the start runs past midnight into the next day."""

    days: frozenset[int]
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Window:
    """When maintenance may run: always, or within one of `ranges` in time zone `timezone`."""

    ranges: tuple[WindowRange, ...]
    timezone: str = "UTC"
    text: str = "always"

    @property
    def always(self) -> bool:
        return not self.ranges

    def is_open(self, now_ms: int) -> bool:
        """Whether the window is open at `now_ms`."""
        if self.always:
            return True
        local = _local(now_ms, self.timezone)
        minute = local.hour * 60 + local.minute
        today, yesterday = local.weekday(), (local.weekday() - 1) % 7
        for r in self.ranges:
            if r.end > r.start:
                if today in r.days and r.start <= minute < r.end:
                    return True
            else:  # past midnight: the part before midnight today, or the tail of yesterday's
                if (today in r.days and minute >= r.start) or (yesterday in r.days and minute < r.end):
                    return True
        return False

    def next_open(self, now_ms: int) -> int | None:
        """The first instant at or after `now_ms` when the window is open (None: never)."""
        if self.is_open(now_ms):
            return now_ms
        if not any(r.days for r in self.ranges):
            return None
        tz = _zone(self.timezone)
        local = _local(now_ms, self.timezone)
        best: int | None = None
        for offset in range(8):  # every range starts within a week
            day = (local + dt.timedelta(days=offset)).date()
            for r in self.ranges:
                if day.weekday() not in r.days:
                    continue
                start = dt.datetime(day.year, day.month, day.day, tzinfo=tz) + dt.timedelta(minutes=r.start)
                at = int(start.timestamp() * 1000)
                if at >= now_ms and (best is None or at < best):
                    best = at
        return best

    def describe(self) -> str:
        return "always" if self.always else f"{self.text} ({self.timezone})"


def _zone(name: str) -> dt.tzinfo:
    if name.upper() == "UTC":
        return dt.UTC
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValidationError(f"{WINDOW_TZ}: unknown time zone {name!r}") from None


def _local(now_ms: int, timezone: str) -> dt.datetime:
    return dt.datetime.fromtimestamp(now_ms / 1000, tz=_zone(timezone))


def _days(text: str) -> frozenset[int]:
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part in ("daily", "*", "every day"):
            out.update(range(7))
            continue
        first, _, last = part.partition("-")
        if first[:3] not in _DAYS or (last and last[:3] not in _DAYS):
            raise ValidationError(f"{WINDOW}: {part!r} is not a day or day range (mon-fri, sat,sun)")
        a = _DAYS.index(first[:3])
        b = _DAYS.index(last[:3]) if last else a
        out.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(out)


def parse_window(text: str | None, timezone: str | None = None) -> Window:
    """A window from its property text: `always`, `never`, or `;`-separated ranges, each
    `[days] [HH:MM-HH:MM]` (days default to every day, hours to the whole day)."""
    tz = (timezone or "UTC").strip() or "UTC"
    _zone(tz)  # an unknown zone is an error now, not at the first check
    if text is None or text.strip().lower() in ("", "always"):
        return Window((), tz)
    if text.strip().lower() == "never":
        return Window((WindowRange(frozenset(), 0, 0),), tz, "never")
    ranges = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        words = part.rsplit(None, 1)
        hours = words[-1] if _RANGE.match(words[-1].replace(" ", "")) else None
        day_text = (words[0] if len(words) > 1 else "") if hours else part
        days = _days(day_text) if day_text else frozenset(range(7))
        start, end = 0, 24 * 60
        if hours is not None:
            m = _RANGE.match(hours)
            assert m is not None
            h1, m1, h2, m2 = (int(g) for g in m.groups())
            if h1 > 23 or m1 > 59 or h2 > 24 or m2 > 59 or (h2 == 24 and m2):
                raise ValidationError(f"{WINDOW}: {hours!r} is not a range of times of day")
            start, end = h1 * 60 + m1, h2 * 60 + m2
            if start == end:
                raise ValidationError(f"{WINDOW}: {hours!r} is an empty range")
        ranges.append(WindowRange(days, start, end))
    if not ranges:
        raise ValidationError(f"{WINDOW}: {text!r} names no range")
    return Window(tuple(ranges), tz, text.strip())


# -- budgets ------------------------------------------------------------------------------------------

BYTES = "rewrite_bytes"
COMMITS = "commits"
FILE_GROUPS = "file_groups"
DELETES = "delete_requests"
HOURLY = (BYTES, COMMITS)  # over a rolling hour; the others count one run


@dataclass(frozen=True, slots=True)
class Cost:
    """What an action spends (estimated before, measured after it runs)."""

    rewrite_bytes: int = 0
    commits: int = 0
    file_groups: int = 0
    delete_requests: int = 0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.rewrite_bytes + other.rewrite_bytes, self.commits + other.commits,
            self.file_groups + other.file_groups, self.delete_requests + other.delete_requests,
        )  # fmt: skip

    def get(self, dimension: str) -> int:
        return int(getattr(self, dimension))

    def to_json(self) -> dict[str, int]:
        return {d: self.get(d) for d in (BYTES, COMMITS, FILE_GROUPS, DELETES)}


@dataclass(frozen=True, slots=True)
class Spend:
    """A cost spent at one instant (from the maintenance log, or by this run)."""

    at_ms: int
    cost: Cost


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits per dimension (None: unlimited): bytes and commits per rolling hour, file groups and
    delete requests per run."""

    rewrite_bytes: int | None = None
    commits: int | None = None
    file_groups: int | None = None
    delete_requests: int | None = None

    def limit(self, dimension: str) -> int | None:
        value: int | None = getattr(self, dimension)
        return value

    def tightest(self, other: Budget) -> Budget:
        """Each dimension's smaller limit (a table's budget within a run's)."""

        def low(a: int | None, b: int | None) -> int | None:
            return b if a is None else a if b is None else min(a, b)

        return Budget(
            low(self.rewrite_bytes, other.rewrite_bytes), low(self.commits, other.commits),
            low(self.file_groups, other.file_groups), low(self.delete_requests, other.delete_requests),
        )  # fmt: skip


_BUDGET_WORDS = {
    "rewrite-bytes": BYTES, "rewrite_bytes": BYTES, "bytes": BYTES,
    "commits": COMMITS, "file-groups": FILE_GROUPS, "file_groups": FILE_GROUPS, "groups": FILE_GROUPS,
    "delete-requests": DELETES, "delete_requests": DELETES, "deletes": DELETES,
}  # fmt: skip


def parse_budget(text: str) -> Budget:
    """A pass's budget from `rewrite-bytes=256MB,commits=10,file-groups=4,delete-requests=1000`
    (bytes and commits per rolling hour, groups and deletes per run; words left out are unlimited)."""
    values: dict[str, int | None] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        dim = _BUDGET_WORDS.get(key.strip().lower())
        if dim is None or not eq:
            raise ValidationError(
                f"budget {part.strip()!r}: expected rewrite-bytes=, commits=, file-groups= or delete-requests="
            )
        if value.strip().lower() in _UNLIMITED:
            values[dim] = None
        elif dim == BYTES:
            values[dim] = parse_size(value, f"budget {key.strip()}")
        else:
            if not value.strip().isdigit():
                raise ValidationError(f"budget {key.strip()} must be a whole number, not {value.strip()!r}")
            values[dim] = int(value)
    return Budget(**values)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a cost does not fit a budget now: the dimension, a one-line reason, and when it may fit
    (None: never, the cost alone exceeds the limit; or the next run, for per-run limits)."""

    dimension: str
    message: str
    resume_at_ms: int | None
    never: bool = False


def spent(dimension: str, history: Iterable[Spend], now_ms: int, run: Cost) -> int:
    """What `dimension` has spent toward its limit at `now_ms`: the rolling hour of `history` plus
    this run for hourly limits; this run only for per-run limits."""
    total = run.get(dimension)
    if dimension in HOURLY:
        total += sum(s.cost.get(dimension) for s in history if now_ms - HOUR_MS < s.at_ms <= now_ms)
    return total


def check_budget(
    budget: Budget, history: Sequence[Spend], now_ms: int, run: Cost, cost: Cost
) -> Refusal | None:
    """None when `cost` fits `budget` at `now_ms` after `history` (earlier runs) and `run` (this run
    so far); else the first dimension it does not fit, with when it would."""
    for dim in (BYTES, COMMITS, FILE_GROUPS, DELETES):
        limit = budget.limit(dim)
        need = cost.get(dim)
        if limit is None or need == 0:
            continue
        used = spent(dim, history, now_ms, run)
        if used + need <= limit:
            continue
        label = dim.replace("_", " ")
        per = "per hour" if dim in HOURLY else "per run"
        if need > limit:
            return Refusal(
                dim, f"needs {need} {label}, more than the whole budget of {limit} {per}", None, True
            )
        message = f"budget spent: {used} of {limit} {label} {per} used, this needs {need}"
        if dim not in HOURLY:
            return Refusal(dim, message + "; the next run has a fresh budget", None)
        return Refusal(dim, message, _resume_at(dim, limit, need, history, now_ms, run))
    return None


def room(budget: Budget, history: Sequence[Spend], now_ms: int, run: Cost, dimension: str) -> int | None:
    """What is left of `dimension`'s limit at `now_ms` (None: unlimited; never negative)."""
    limit = budget.limit(dimension)
    if limit is None:
        return None
    return max(0, limit - spent(dimension, history, now_ms, run))


def _resume_at(
    dim: str, limit: int, need: int, history: Sequence[Spend], now_ms: int, run: Cost
) -> int | None:
    """When enough of the rolling hour's spending has aged out for `need` to fit (this run's own
    spending ages from `now_ms`)."""
    window = sorted(
        [s for s in history if now_ms - HOUR_MS < s.at_ms <= now_ms and s.cost.get(dim)]
        + ([Spend(now_ms, run)] if run.get(dim) else []),
        key=lambda s: s.at_ms,
    )
    used = sum(s.cost.get(dim) for s in window)
    for s in window:
        used -= s.cost.get(dim)
        if used + need <= limit:
            return s.at_ms + HOUR_MS
    return None


# -- retention --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExpiryCutoff:
    """The cut-off expiry may use at one instant: snapshots at or after `cutoff_ms` are kept.
    `limited_by` names what moved it (the retention floor, a reader lease), with the detail."""

    cutoff_ms: int
    policy_cutoff_ms: int
    limited_by: str | None = None
    detail: str | None = None


def expiry_cutoff(policy: Policy, now_ms: int, leased: Iterable[tuple[int, str]] = ()) -> ExpiryCutoff:
    """The expiry cut-off at `now_ms`: the policy's max snapshot age, never later than the retention
    floor (`now - min-reader-age`) nor than the oldest snapshot a reader lease holds (`leased`:
    (snapshot timestamp ms, who)), so neither a reader nor a recovery loses what it reads."""
    policy_cutoff = now_ms - policy.max_snapshot_age_ms
    cutoff, limited, detail = policy_cutoff, None, None
    floor = now_ms - policy.min_reader_age_ms
    if floor < cutoff:
        cutoff, limited = floor, "retention_floor"
        detail = f"{MIN_READER_AGE} = {format_duration(policy.min_reader_age_ms)} keeps everything younger"
    oldest = min(leased, default=None)
    if oldest is not None and oldest[0] < cutoff:
        cutoff, limited = oldest[0], "reader_lease"
        detail = f"a reader lease ({oldest[1]}) holds a snapshot committed at {iso(oldest[0])}"
    return ExpiryCutoff(cutoff, policy_cutoff, limited, detail)


def format_duration(ms: int) -> str:
    """`90d`, `6h`, `30m`, `10s` or `500ms`: the largest unit that divides `ms`."""
    for unit, size in (("d", DAY_MS), ("h", HOUR_MS), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# -- the policy ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Policy:
    """A table's maintenance policy (see the module docstring)."""

    min_snapshots: int
    max_snapshot_age_ms: int
    max_ref_age_ms: int | None
    min_reader_age_ms: int
    target_file_size: int | None
    sort_order: str | None
    auto: frozenset[str]
    window: Window
    budget: Budget
    max_commit_failure_rate: float
    orphan_age_ms: int = DEFAULT_ORPHAN_AGE_MS

    def to_json(self) -> dict[str, object]:
        return {
            "min_snapshots": self.min_snapshots,
            "max_snapshot_age": format_duration(self.max_snapshot_age_ms),
            "max_ref_age": None if self.max_ref_age_ms is None else format_duration(self.max_ref_age_ms),
            "min_reader_age": format_duration(self.min_reader_age_ms),
            "target_file_size": self.target_file_size,
            "sort_order": self.sort_order,
            "auto": [a for a in ACTION_ORDER if a in self.auto],
            "window": self.window.describe(),
            "budget": {d: self.budget.limit(d) for d in (BYTES, COMMITS, FILE_GROUPS, DELETES)},
            "max_commit_failure_rate": self.max_commit_failure_rate,
            "orphan_age": format_duration(self.orphan_age_ms),
        }


def parse_policy(properties: Mapping[str, str], *, table: str = "table") -> Policy:
    """The policy the table properties set (defaults for what they leave out); a value that does
    not parse raises `ValidationError` naming the table and the property."""

    def text(key: str) -> str | None:
        value = properties.get(key)
        return None if value is None else str(value).strip()

    def whole(value: str, key: str, minimum: int, kind: str) -> int:
        what = f"{table}: property {key}"
        try:
            n = int(value)
        except ValueError:
            raise ValidationError(f"{what} must be {kind}, not {value!r}") from None
        if n < minimum:
            floor = f"be at least {minimum}" if minimum else "not be negative"
            raise ValidationError(f"{what} must {floor}, not {n}")
        return n

    def positive_int(key: str, default: int) -> int:
        value = text(key)
        return default if value is None else whole(value, key, 1, "an integer")

    def duration(key: str, default: int | None) -> int | None:
        value = text(key)
        if value is None:
            return default
        if value.lower() in ("forever", "none"):
            return None
        return parse_duration_ms(value, f"{table}: property {key}")

    def limit(key: str, size: bool) -> int | None:
        value = text(key)
        if value is None or value.lower() in _UNLIMITED:
            return None
        if size:
            return parse_size(value, f"{table}: property {key}")
        return whole(value, key, 0, "a whole number or 'unlimited'")

    try:
        # Iceberg's own properties keep Iceberg's form (whole milliseconds, bytes): other engines read them too
        max_age = positive_int(MAX_SNAPSHOT_AGE, 5 * DAY_MS)
        max_ref_age = positive_int(MAX_REF_AGE, 0) or None
        target = positive_int(TARGET_FILE_SIZE, 0) or None
        reader_age = duration(MIN_READER_AGE, HOUR_MS)
        orphan_age = orphan_age_ms(properties, table=table)
        auto_text = text(AUTO)
        auto = (
            frozenset((REWRITE_DATA, REWRITE_MANIFESTS, EXPIRE))
            if auto_text is None
            else parse_actions(auto_text)
        )
        window = parse_window(text(WINDOW), text(WINDOW_TZ))
        rate_text = text(MAX_FAILURE_RATE)
        rate = 0.5 if rate_text is None else float(rate_text)
    except ValidationError as e:
        message = str(e)
        raise ValidationError(message if message.startswith(table) else f"{table}: {message}") from None
    except ValueError:
        raise ValidationError(
            f"{table}: property {MAX_FAILURE_RATE} must be a number, not {rate_text!r}"
        ) from None
    if not 0 <= rate <= 1:
        raise ValidationError(f"{table}: property {MAX_FAILURE_RATE} must be between 0 and 1, not {rate}")
    return Policy(
        min_snapshots=positive_int(MIN_SNAPSHOTS, 1),
        max_snapshot_age_ms=max_age,
        max_ref_age_ms=max_ref_age,
        min_reader_age_ms=reader_age if reader_age is not None else 0,
        target_file_size=target,
        sort_order=text(SORT_ORDER) or None,
        auto=auto,
        window=window,
        budget=Budget(
            limit(BUDGET_REWRITE_BYTES, True),
            limit(BUDGET_COMMITS, False),
            limit(BUDGET_FILE_GROUPS, False),
            limit(BUDGET_DELETES, False),
        ),
        max_commit_failure_rate=rate,
        orphan_age_ms=orphan_age,
    )


def orphan_age_ms(properties: Mapping[str, str], *, table: str = "table") -> int:
    """How old an unreferenced file must be before orphan removal deletes it (`ORPHAN_AGE`)."""
    value = properties.get(ORPHAN_AGE)
    if value is None:
        return DEFAULT_ORPHAN_AGE_MS
    age = parse_duration_ms(str(value).strip(), f"{table}: property {ORPHAN_AGE}")
    if age < HOUR_MS:  # files younger than an hour may belong to a commit in flight (`orphans.plan_orphans`)
        raise ValidationError(f"{table}: property {ORPHAN_AGE} must be at least 1h, not {value!r}")
    return age


def failure_rate(outcomes: Iterable[tuple[int, bool]], now_ms: int) -> tuple[float, int]:
    """(failed share, runs) over the last day of (finished ms, failed or conflicted) run outcomes."""
    recent = [failed for at, failed in outcomes if now_ms - DAY_MS < at <= now_ms]
    return (sum(recent) / len(recent) if recent else 0.0), len(recent)
