"""The maintenance policy's rules with a fake clock: property parsing, windows (time zones, ranges
past midnight), budgets over a rolling hour, the expiry cut-off under the retention floor and
reader leases. Truth is computed here from the rule's words, not from the module's helpers."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iceduck.errors import ValidationError
from iceduck.maintenance import policy as pol
from iceduck.maintenance.policy import (
    Budget,
    Cost,
    Spend,
    check_budget,
    expiry_cutoff,
    parse_policy,
    parse_window,
)

H = 3600_000


def at(text: str, tz: str = "UTC") -> int:
    """Milliseconds of a local wall-clock time `YYYY-MM-DD HH:MM` in `tz`."""
    zone = dt.UTC if tz == "UTC" else zoneinfo.ZoneInfo(tz)
    return int(dt.datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=zone).timestamp() * 1000)


def test_defaults_when_no_property_is_set() -> None:
    p = parse_policy({})
    assert p.min_snapshots == 1
    assert p.max_snapshot_age_ms == 5 * 24 * H
    assert p.max_ref_age_ms is None
    assert p.min_reader_age_ms == H
    assert p.auto == {"rewrite_data_files", "rewrite_manifests", "expire_snapshots"}
    assert p.window.always and p.window.is_open(0)
    assert p.budget == Budget()
    assert p.max_commit_failure_rate == 0.5


def test_properties_are_read_in_their_documented_forms() -> None:
    p = parse_policy(
        {
            "history.expire.min-snapshots-to-keep": "20",
            "history.expire.max-snapshot-age-ms": str(90 * 24 * H),
            "history.expire.max-ref-age-ms": str(400 * 24 * H),
            "iceduck.retention.min-reader-age": "6h",
            "write.target-file-size-bytes": "1048576",
            "iceduck.maintenance.rewrite.sort-order": "ts DESC",
            "iceduck.maintenance.auto": "expire, orphans",
            "iceduck.maintenance.window": "mon-fri 22:00-06:00; sat,sun",
            "iceduck.maintenance.window.timezone": "Europe/Berlin",
            "iceduck.maintenance.budget.rewrite-bytes-per-hour": "256MB",
            "iceduck.maintenance.budget.commits-per-hour": "12",
            "iceduck.maintenance.budget.file-groups-per-run": "3",
            "iceduck.maintenance.budget.delete-requests-per-run": "unlimited",
            "iceduck.maintenance.max-commit-failure-rate": "0.25",
        },
        table="fin.ledger",
    )
    assert (p.min_snapshots, p.max_snapshot_age_ms, p.max_ref_age_ms) == (20, 90 * 24 * H, 400 * 24 * H)
    assert p.min_reader_age_ms == 6 * H
    assert p.target_file_size == 1048576 and p.sort_order == "ts DESC"
    assert p.auto == {"expire_snapshots", "remove_orphan_files"}
    assert p.budget == Budget(256 * 1024 * 1024, 12, 3, None)
    assert p.max_commit_failure_rate == 0.25
    assert p.window.timezone == "Europe/Berlin" and len(p.window.ranges) == 2
    assert parse_policy({"iceduck.maintenance.auto": "all"}).auto == set(pol.ACTION_ORDER)
    assert parse_policy({"iceduck.maintenance.auto": "none"}).auto == set()


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("history.expire.max-snapshot-age-ms", "90d", "must be an integer"),  # Iceberg's form: ms
        ("history.expire.min-snapshots-to-keep", "0", "at least 1"),
        ("iceduck.retention.min-reader-age", "six hours", "duration"),
        ("iceduck.maintenance.auto", "expire,vacuum", "unknown maintenance action 'vacuum'"),
        ("iceduck.maintenance.window", "someday 01:00-02:00", "not a day"),
        ("iceduck.maintenance.window", "01:00-01:00", "empty range"),
        ("iceduck.maintenance.window", "25:00-26:00", "times of day"),
        ("iceduck.maintenance.window.timezone", "Mars/Olympus", "unknown time zone"),
        ("iceduck.maintenance.budget.rewrite-bytes-per-hour", "lots", "size"),
        ("iceduck.maintenance.budget.commits-per-hour", "-2", "must not be negative"),
        ("iceduck.maintenance.max-commit-failure-rate", "2", "between 0 and 1"),
    ],
)
def test_a_bad_property_is_one_line_naming_table_and_property(key: str, value: str, words: str) -> None:
    with pytest.raises(ValidationError) as e:
        parse_policy({key: value}, table="ns.t")
    text = str(e.value)
    assert text.startswith("ns.t: ") and words in text and "\n" not in text
    assert key in text or key.endswith(("window", "timezone", "auto"))


# -- windows ----------------------------------------------------------------------------------------


def test_window_hours_in_a_time_zone() -> None:
    w = parse_window("01:00-05:00", "America/New_York")
    # 2026-07-01 is a Wednesday; New York is UTC-4 in July
    assert not w.is_open(at("2026-07-01 00:59", "America/New_York"))
    assert w.is_open(at("2026-07-01 01:00", "America/New_York"))
    assert w.is_open(at("2026-07-01 04:59", "America/New_York"))
    assert not w.is_open(at("2026-07-01 05:00", "America/New_York"))
    assert w.is_open(at("2026-07-01 06:30"))  # 02:30 in New York
    assert w.next_open(at("2026-07-01 12:00", "America/New_York")) == at(
        "2026-07-02 01:00", "America/New_York"
    )


def test_window_past_midnight_belongs_to_the_named_start_day() -> None:
    w = parse_window("fri 22:00-06:00")
    assert w.is_open(at("2026-07-03 22:00"))  # Friday evening
    assert w.is_open(at("2026-07-04 05:59"))  # Saturday morning: Friday's range
    assert not w.is_open(at("2026-07-04 22:30"))  # Saturday evening
    assert not w.is_open(at("2026-07-03 05:00"))  # Friday morning belongs to Thursday, not listed
    assert w.next_open(at("2026-07-04 06:00")) == at("2026-07-10 22:00")


def test_window_days_without_hours_and_never() -> None:
    w = parse_window("sat,sun")
    assert w.is_open(at("2026-07-04 00:00")) and w.is_open(at("2026-07-05 23:59"))
    assert not w.is_open(at("2026-07-06 00:00"))
    assert w.next_open(at("2026-07-06 10:00")) == at("2026-07-11 00:00")
    never = parse_window("never")
    assert not never.is_open(at("2026-07-04 00:00")) and never.next_open(0) is None


def test_window_across_a_daylight_saving_change() -> None:
    w = parse_window("02:30-03:30", "Europe/Berlin")
    # 2026-03-29: Berlin's clocks jump from 02:00 to 03:00; 03:00-03:30 local still exists
    assert w.is_open(at("2026-03-29 03:10", "Europe/Berlin"))
    assert w.is_open(at("2026-03-30 02:45", "Europe/Berlin"))


@given(
    st.integers(min_value=0, max_value=2 * 10**12), st.sampled_from(["UTC", "Asia/Kolkata", "America/Denver"])
)
def test_next_open_is_open_and_nothing_earlier_is(now: int, tz: str) -> None:
    w = parse_window("tue 23:30-00:15; thu 09:00-10:00", tz)
    nxt = w.next_open(now)
    assert nxt is not None and nxt >= now and w.is_open(nxt)
    # no open minute between now and nxt (checked on the minute grid)
    step = 60_000
    t = now
    while t < nxt:
        assert not w.is_open(t)
        t += step


# -- budgets ----------------------------------------------------------------------------------------


def test_hourly_budget_counts_a_rolling_hour_and_says_when_room_returns() -> None:
    b = Budget(rewrite_bytes=100)
    now = 10 * H
    history = [Spend(now - 2 * H, Cost(rewrite_bytes=90)), Spend(now - 50 * 60_000, Cost(rewrite_bytes=60))]
    # only the spend 50 minutes ago counts: 60 used, 40 fits, 41 does not
    assert check_budget(b, history, now, Cost(), Cost(rewrite_bytes=40)) is None
    r = check_budget(b, history, now, Cost(), Cost(rewrite_bytes=41))
    assert r is not None and r.dimension == "rewrite_bytes" and not r.never
    assert r.resume_at_ms == now - 50 * 60_000 + H  # when that spend leaves the hour
    assert "60 of 100" in r.message
    # what this run spent counts too; room returns an hour after now for it
    r = check_budget(b, [], now, Cost(rewrite_bytes=70), Cost(rewrite_bytes=40))
    assert r is not None and r.resume_at_ms == now + H
    # a cost larger than the whole budget never fits
    r = check_budget(b, [], now, Cost(), Cost(rewrite_bytes=101))
    assert r is not None and r.never and r.resume_at_ms is None


def test_per_run_budgets_ignore_history() -> None:
    b = Budget(file_groups=3, delete_requests=10)
    long_history = [Spend(5 * H, Cost(file_groups=100, delete_requests=100))]
    assert check_budget(b, long_history, 5 * H, Cost(), Cost(file_groups=3, delete_requests=10)) is None
    r = check_budget(b, long_history, 5 * H, Cost(file_groups=2), Cost(file_groups=2))
    assert r is not None and r.dimension == "file_groups" and "next run" in r.message
    assert b.tightest(Budget(file_groups=1, commits=5)) == Budget(None, 5, 1, 10)


@given(
    st.lists(st.tuples(st.integers(0, 3 * H), st.integers(0, 50)), max_size=12),
    st.integers(1, 120),
    st.lists(st.integers(0, 60), max_size=15),
)
def test_accepting_only_what_fits_never_exceeds_an_hourly_budget(
    past: list[tuple[int, int]], limit: int, asks: list[int]
) -> None:
    """Whatever was spent before and whatever is asked, the costs `check_budget` lets through keep
    every rolling hour at or under the limit (given the history itself was)."""
    now = 3 * H
    history: list[Spend] = []
    for t, n in sorted(past):
        if check_budget(Budget(commits=limit), history, t, Cost(), Cost(commits=n)) is None:
            history.append(Spend(t, Cost(commits=n)))
    run = Cost()
    for n in asks:
        if check_budget(Budget(commits=limit), history, now, run, Cost(commits=n)) is None:
            run = run + Cost(commits=n)
    events = [*history, Spend(now, run)]
    for e in events:  # every hour-long window ending at an event
        total = sum(s.cost.commits for s in events if e.at_ms - H < s.at_ms <= e.at_ms)
        assert total <= limit


# -- retention --------------------------------------------------------------------------------------


def test_expiry_cutoff_never_passes_the_floor_or_a_lease() -> None:
    now = 100 * 24 * H
    p = parse_policy({"history.expire.max-snapshot-age-ms": str(H), "iceduck.retention.min-reader-age": "6h"})
    c = expiry_cutoff(p, now)
    assert c.cutoff_ms == now - 6 * H and c.policy_cutoff_ms == now - H and c.limited_by == "retention_floor"
    c = expiry_cutoff(p, now, [(now - 30 * H, "export"), (now - 10 * H, "report")])
    assert c.cutoff_ms == now - 30 * H and c.limited_by == "reader_lease" and "export" in (c.detail or "")
    # a lease on a snapshot younger than the cut-off changes nothing
    c = expiry_cutoff(p, now, [(now - 2 * H, "dash")])
    assert c.cutoff_ms == now - 6 * H and c.limited_by == "retention_floor"
    relaxed = parse_policy({"history.expire.max-snapshot-age-ms": str(90 * 24 * H)})
    assert expiry_cutoff(relaxed, now).limited_by is None


def test_failure_rate_counts_the_last_day() -> None:
    now = 10 * 24 * H
    outcomes = [(now - 25 * H, True)] * 5 + [(now - H, True), (now - 2 * H, False), (now - 3 * H, False)]
    assert pol.failure_rate(outcomes, now) == (1 / 3, 3)
