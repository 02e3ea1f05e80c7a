"""The server's Prometheus metrics, served at ``/metrics``.

Each server has its own registry, so two engines in one process (the tests) count apart.
Rates (tokens/s, requests/s) are what Prometheus derives from the counters; the gauges hold
the latest step's occupancy and speed for a glance at ``/metrics`` itself.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Seconds: from a millisecond per token up to a first token behind a long queue.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """What every engine reports: its queue, how full its batches run, how requests end."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.queue_depth = Gauge("queue_depth", "requests waiting", registry=self.registry)
        self.batch_occupancy = Gauge(
            "batch_occupancy",
            "share of the batch's rows used by the latest step",
            registry=self.registry,
        )
        self.requests = Counter(
            "requests_finished",
            "requests finished, by reason",
            ["finish_reason"],
            registry=self.registry,
        )

    def histogram(self, name: str, help_text: str) -> Histogram:
        return Histogram(name, help_text, buckets=LATENCY_BUCKETS, registry=self.registry)
