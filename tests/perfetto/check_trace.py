#!/usr/bin/env python3
"""Checks a .pftrace that accgraph wrote, decoded with the perfetto package's own protos (an
independent reader: perfetto.protos.perfetto.trace.perfetto_trace_pb2), against what the test
expects (a JSON file written by make_perfetto_traces from the reports themselves).

usage: check_trace.py TRACE.pftrace EXPECTED.json

Every packet is checked: it is a track descriptor or a track event; descriptors have unique
uuids, process tracks unique pids and the expected names, every other track hangs under a
process and merges with its siblings by a sibling_merge_key shared by exactly the backing
tracks of one logical track (same name, same order rank); events refer to described tracks, are
in time order, and every backing track's begin/end packets nest (a stack). The slices found
(process, track, name, start, end, category, typed arguments) must be exactly the expected
ones, and each process's "accgraph trace info" event must hold the expected values.
"""
import collections
import json
import sys

try:
    from google.protobuf import unknown_fields
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
        Trace,
        TrackDescriptor,
        TrackEvent,
    )
except ImportError as error:  # the ctest wrapper checks this first; say it plainly anyway
    sys.exit(f"check_trace.py: cannot import the perfetto package's protos ({error}): "
             "pip install perfetto protobuf (scripts/perfetto-venv.sh)")

failures = []


def fail(message):
    failures.append(message)


def annotation_value(a):
    """A debug annotation as (type, value), lists as ("array", [(type, value), ...])."""
    kind = a.WhichOneof("value")
    if kind is None:
        return ("array", [annotation_value(v) for v in a.array_values])
    if kind in ("int_value", "uint_value", "bool_value", "double_value", "string_value"):
        return (kind[: -len("_value")], getattr(a, kind))
    return (kind, str(getattr(a, kind)))


def expected_value(value):
    """The expected JSON form ["int", 5] / ["array", [["int", 0], ...]] as a tuple."""
    kind, payload = value
    if kind == "array":
        return ("array", [expected_value(v) for v in payload])
    return (kind, payload)


def check_no_unknown_fields(message, where):
    if len(unknown_fields.UnknownFieldSet(message)):
        fail(f"{where}: fields Perfetto's protos do not know (a wrong field number?)")
        return
    for field, value in message.ListFields():
        if field.message_type is None:
            continue
        repeated = getattr(field, "is_repeated", None)
        if repeated is None:
            repeated = field.label == field.LABEL_REPEATED
        for i, item in enumerate(value if repeated else [value]):
            check_no_unknown_fields(item, f"{where}.{field.name}[{i}]" if repeated else
                                    f"{where}.{field.name}")


def args_of(event):
    names = [a.name for a in event.debug_annotations]
    duplicates = [n for n, count in collections.Counter(names).items() if count > 1]
    if duplicates:
        fail(f"event '{event.name}' repeats annotation(s) {duplicates}")
    return {a.name: annotation_value(a) for a in event.debug_annotations}


def main():
    trace_path, expected_path = sys.argv[1], sys.argv[2]
    with open(trace_path, "rb") as f:
        data = f.read()
    with open(expected_path, encoding="utf-8") as f:
        expected = json.load(f)
    trace = Trace()
    trace.ParseFromString(data)
    # Every field accgraph writes must be one Perfetto knows (a wrong field number would decode
    # as an unknown field and be ignored by the UI).
    check_no_unknown_fields(trace, "trace")

    processes = {}          # uuid -> descriptor
    tracks = {}             # uuid -> descriptor (non-process)
    pids = set()
    sequences = set()
    timed = []              # (packet index, timestamp, track uuid) of every event
    open_slices = collections.defaultdict(list)  # backing uuid -> stack of (begin packet)
    slices = []
    infos = {}              # process name -> annotations
    for index, packet in enumerate(trace.packet):
        kind = packet.WhichOneof("data")
        if kind == "track_descriptor":
            d = packet.track_descriptor
            if d.uuid == 0 or d.uuid in processes or d.uuid in tracks:
                fail(f"packet {index}: track uuid {d.uuid} is 0 or described twice")
            if d.HasField("process"):
                if d.process.pid in pids:
                    fail(f"packet {index}: pid {d.process.pid} used twice")
                pids.add(d.process.pid)
                processes[d.uuid] = d
            else:
                if d.parent_uuid not in processes:
                    fail(f"packet {index}: track '{d.name}' has no process parent "
                         f"(parent_uuid {d.parent_uuid})")
                if d.sibling_merge_behavior != TrackDescriptor.SIBLING_MERGE_BEHAVIOR_BY_SIBLING_MERGE_KEY:
                    fail(f"packet {index}: track '{d.name}' does not merge by sibling_merge_key")
                if not d.sibling_merge_key:
                    fail(f"packet {index}: track '{d.name}' has no sibling_merge_key")
                tracks[d.uuid] = d
            continue
        if kind != "track_event":
            fail(f"packet {index}: unexpected packet kind {kind}")
            continue
        if not packet.HasField("trusted_packet_sequence_id"):
            fail(f"packet {index}: event without trusted_packet_sequence_id")
        sequences.add(packet.trusted_packet_sequence_id)
        e = packet.track_event
        timed.append((index, packet.timestamp, e.track_uuid))
        if e.type == TrackEvent.TYPE_INSTANT:
            if e.track_uuid not in processes or e.name != "accgraph trace info":
                fail(f"packet {index}: instant '{e.name}' not an accgraph trace info on a process")
                continue
            name = processes[e.track_uuid].process.process_name
            if name in infos:
                fail(f"packet {index}: second trace info for process '{name}'")
            infos[name] = args_of(e)
            continue
        if e.track_uuid not in tracks:
            fail(f"packet {index}: event on undescribed track {e.track_uuid}")
            continue
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            open_slices[e.track_uuid].append(packet)
        elif e.type == TrackEvent.TYPE_SLICE_END:
            stack = open_slices[e.track_uuid]
            if not stack:
                fail(f"packet {index}: end on track {e.track_uuid} with no open slice")
                continue
            begin = stack.pop()
            track = tracks[e.track_uuid]
            slices.append({
                "process": processes[track.parent_uuid].process.process_name,
                "track": track.name,
                "backing": e.track_uuid,
                "name": begin.track_event.name,
                "start": begin.timestamp,
                "end": packet.timestamp,
                "category": list(begin.track_event.categories),
                "args": args_of(begin.track_event),
            })
        else:
            fail(f"packet {index}: unexpected event type {e.type}")
    for uuid, stack in open_slices.items():
        if stack:
            fail(f"track {uuid}: {len(stack)} slice(s) never end")

    # Events are in time order on the host clock: a trace's own file orders its devices' events
    # by device time minus the device's clock offset (its trace info); a merged trace has the
    # offsets applied already (its trace infos carry merged_offset_ns).
    process_of = {uuid: uuid for uuid in processes}
    process_of.update({uuid: d.parent_uuid for uuid, d in tracks.items()})
    offset = {}
    for uuid, d in processes.items():
        i = infos.get(d.process.process_name, {})
        merged = "merged_offset_ns" in i
        calibrated = i.get("clock_calibrated") == ("bool", True)
        offset[uuid] = i["clock_offset_ns"][1] if calibrated and not merged else 0
    last = None
    for index, timestamp, uuid in timed:
        key = timestamp - offset.get(process_of.get(uuid), 0)
        if last is not None and key < last:
            fail(f"packet {index}: host time {key} before the previous event's {last}")
        last = key

    # Logical tracks: backing tracks grouped by merge key.
    logical = collections.defaultdict(list)
    for uuid, d in tracks.items():
        logical[(d.parent_uuid, d.sibling_merge_key)].append(d)
    order = collections.defaultdict(list)  # process name -> [(rank, track name, backings)]
    for (parent, key), members in logical.items():
        if len({(m.name, m.sibling_order_rank) for m in members}) != 1:
            fail(f"merge key {key}: its backing tracks differ in name or order rank")
        order[processes[parent].process.process_name].append(
            (members[0].sibling_order_rank, members[0].name, len(members)))
    for name, entries in order.items():
        ranks = [r for r, _, _ in entries]
        if len(set(ranks)) != len(ranks):
            fail(f"process '{name}': two tracks share an order rank")
    for d in processes.values():
        if d.child_ordering != TrackDescriptor.EXPLICIT:
            fail(f"process '{d.process.process_name}': child_ordering is not EXPLICIT")

    # Against the expectation.
    got_processes = sorted(d.process.process_name for d in processes.values())
    if "processes" in expected and got_processes != sorted(expected["processes"]):
        fail(f"processes {got_processes}, expected {sorted(expected['processes'])}")
    if "process_count" in expected and len(got_processes) != expected["process_count"]:
        fail(f"{len(got_processes)} processes, expected {expected['process_count']}")
    # A run whose times are not known in advance (the demo): counts per track and the track
    # order, where "stream" stands for any stream's track ("stream <id>").
    def kind(track_name):
        return "stream" if track_name.startswith("stream ") else track_name
    if "track_kinds" in expected:
        for name, entries in order.items():
            got = []
            for _, track, _ in sorted(entries):
                if not got or got[-1] != kind(track):
                    got.append(kind(track))
            if got != expected["track_kinds"]:
                fail(f"process '{name}': track kinds {got}, expected {expected['track_kinds']}")
    if "slice_counts" in expected:
        got = collections.defaultdict(collections.Counter)
        for s in slices:
            got[kind(s["track"])][s["name"]] += 1
        got = {k: dict(v) for k, v in got.items()}
        if got != expected["slice_counts"]:
            fail(f"slices per track {got}, expected {expected['slice_counts']}")
    for track, least in expected.get("min_backings", {}).items():
        most = max([b for entries in order.values() for _, t, b in entries if t == track],
                   default=0)
        if most < least:
            fail(f"track '{track}' has {most} backing track(s), expected at least {least} "
                 f"(its regions overlap)")
    for name, want in expected.get("tracks", {}).items():
        got = [track for _, track, _ in sorted(order.get(name, []))]
        if got != want:
            fail(f"process '{name}': tracks {got}, expected {want} (in this order)")
    for key, want in expected.get("backings", {}).items():
        process, track = key.split("|")
        got = [b for _, t, b in order.get(process, []) if t == track]
        if got != [want]:
            fail(f"'{process}' track '{track}': backing tracks {got}, expected {want}")
    if "sequences" in expected and len(sequences) != expected["sequences"]:
        fail(f"{len(sequences)} packet sequences, expected {expected['sequences']}")

    def slice_key(s):
        return (s["process"], s["track"], s["name"], s["start"], s["end"],
                tuple(s["category"]), json.dumps(s["args"], sort_keys=True, default=str))

    want_slices = collections.Counter()
    for s in expected.get("slices", []):
        s = dict(s)
        s["args"] = {k: expected_value(v) for k, v in s["args"].items()}
        want_slices[slice_key(s)] += 1
    got_slices = collections.Counter(slice_key(s) for s in slices) if "slices" in expected \
        else collections.Counter()
    for key in (want_slices - got_slices):
        fail(f"missing slice {key}")
    for key in (got_slices - want_slices):
        fail(f"unexpected slice {key}")
    for name, want in expected.get("infos", {}).items():
        got = infos.get(name)
        if got is None:
            fail(f"process '{name}': no accgraph trace info")
            continue
        for key, value in want.items():
            if got.get(key) != expected_value(value):
                fail(f"process '{name}': trace info {key} = {got.get(key)}, expected {value}")

    if failures:
        for message in failures[:50]:
            print(f"FAIL: {message}")
        print(f"check_trace.py: {trace_path}: {len(failures)} failure(s)")
        return 1
    print(f"check_trace.py: {trace_path}: {len(trace.packet)} packets, {len(slices)} slices, "
          f"{len(processes)} processes, {len(tracks)} backing tracks: all as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
