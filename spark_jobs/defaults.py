"""Job defaults shared by the jobs and ``rmqproxy report`` (no pyspark import here, so the click
command loads without Spark installed)."""

#: percentile_approx accuracy: the value reported for percentile p has a rank within n/accuracy
#: of p*n, so p99 lies between p98.9 and p99.1. Spark's own default is 10000, which costs about
#: twice the CPU per percentile column here (larger summaries to merge per group); use
#: ``--accuracy 10000`` when a 0.01% rank error matters.
DEFAULT_ACCURACY = 1_000
#: DESIGN.md default ``shortPollingTimeMills``: the deadline of a held pull in short polling mode.
DEFAULT_SHORT_POLLING_MS = 1000
#: distribution/conf/logback_broker.xml (rocketmq-all-4.9.8) stamps stats.log with %d{...,GMT+8}.
DEFAULT_STATS_TIMEZONE = "+08:00"
