"""Deduplication within a watermark: an event id seen again within 30 s of event time is dropped."""


def dedup(events, params):
    delay = f"{int(params.get('delay_s', 30))} seconds"
    unique = events.withWatermark("at", delay).dropDuplicatesWithinWatermark(["event"])
    return unique.select(unique["event"].alias("key"), "event", "user", "at")
