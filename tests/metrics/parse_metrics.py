#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
# Reads print_metrics' output with prometheus_client's text parser (Debian's
# python3-prometheus-client) and checks what the story there must give: every family typed (the
# parser turns a sample it cannot place into an untyped family of its own), each lock's samples
# under its own label value, escapes undone, histogram buckets cumulative and ending at +Inf.
#   parse_metrics.py <print_metrics>
import subprocess
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("FAILED: no prometheus_client module in " + sys.executable +
             " (Debian: apt-get install python3-prometheus-client)")

ODD = 'pay "eu"\\west\nline'
COUNTERS = {"dlock_acquisitions": 2, "dlock_hand_offs": 0, "dlock_reentries": 1, "dlock_failed_tries": 1, "dlock_attempts": 3,
            "dlock_outage_retries": 0, "dlock_renewals": 0, "dlock_renewal_round_trips": 0,
            "dlock_renewal_failures": 0, "dlock_lost_leases": 0}

text = subprocess.run([sys.argv[1]], check=True, capture_output=True, text=True).stdout
families = {family.name: family for family in text_string_to_metric_families(text)}
errors = []

untyped = [name for name, family in families.items() if family.type == "untyped"]
if untyped:
    errors.append(f"samples outside their family: {untyped}")
GAUGES = {"dlock_holds": 0, "dlock_waiting_threads": 0}  # nothing held or waited for at the end
expected_names = set(COUNTERS) | set(GAUGES) | {"dlock_wait_seconds", "dlock_semaphore_permits_in_use",
                                                 "dlock_semaphore_capacity"}
if set(families) != expected_names:
    errors.append(f"families {sorted(families)}, expected {sorted(expected_names)}")


def value(family, sample_name, lock, **labels):
    found = [s.value for s in families[family].samples
             if s.name == sample_name and s.labels == dict(lock=lock, **labels)]
    if len(found) != 1:
        errors.append(f"{sample_name}{{lock={lock!r}, {labels}}}: {len(found)} samples")
        return None
    return found[0]


for name, expected in COUNTERS.items():
    if name in families and families[name].type != "counter":
        errors.append(f"{name} is a {families[name].type}")
    for lock, want in (("orders", expected), (ODD, 0)):
        got = value(name, name + "_total", lock) if name in families else None
        if got != want:
            errors.append(f"{name}_total{{lock={lock!r}}} is {got}, expected {want}")

for name, expected in GAUGES.items():
    if name in families and families[name].type != "gauge":
        errors.append(f"{name} is a {families[name].type}")
    for lock in ("orders", ODD):
        got = value(name, name, lock) if name in families else None
        if got != expected:
            errors.append(f"{name}{{lock={lock!r}}} is {got}, expected {expected}")

if "dlock_wait_seconds" in families:
    histogram = families["dlock_wait_seconds"]
    if histogram.type != "histogram":
        errors.append(f"dlock_wait_seconds is a {histogram.type}")
    for lock, waits in (("orders", 1), (ODD, 0)):
        buckets = [(s.labels["le"], s.value) for s in histogram.samples
                   if s.name == "dlock_wait_seconds_bucket" and s.labels["lock"] == lock]
        bounds = [float(le) for le, _ in buckets]
        counts = [count for _, count in buckets]
        if not buckets or buckets[-1][0] != "+Inf":
            errors.append(f"{lock!r}: the last bucket is not +Inf: {buckets}")
        if bounds != sorted(bounds) or counts != sorted(counts):
            errors.append(f"{lock!r}: buckets not increasing and cumulative: {buckets}")
        if counts and (counts[0] != waits or counts[-1] != waits):
            errors.append(f"{lock!r}: buckets {buckets}, expected {waits} wait(s) of under 1 ms")
        if value("dlock_wait_seconds", "dlock_wait_seconds_count", lock) != waits:
            errors.append(f"{lock!r}: _count is not {waits}")
        if value("dlock_wait_seconds", "dlock_wait_seconds_sum", lock) != 0:
            errors.append(f"{lock!r}: _sum of sub-millisecond waits is not 0")

if errors:
    print(text)
    sys.exit("FAILED:\n  " + "\n  ".join(errors))
print(f"parsed {len(families)} families, {sum(len(f.samples) for f in families.values())} samples")
