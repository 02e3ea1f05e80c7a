"""The server's Prometheus metrics, served at ``/metrics``.

Each server has its own registry, so two engines in one process (the tests) count apart.
Rates (tokens/s, requests/s) are what Prometheus derives from the counters; the gauges hold
the latest decode step's occupancy and speed for a glance at ``/metrics`` itself.
"""

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Seconds: from a millisecond per token up to a first token behind a long queue.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge("queue_depth", "requests waiting for a slot", registry=r)
        self.batch_occupancy = Gauge(
            "batch_occupancy", "share of the slots in the latest decode step", registry=r
        )
        self.tokens_per_second = Gauge(
            "decode_tokens_per_second",
            "tokens generated per second by the latest decode step",
            registry=r,
        )
        self.generated_tokens = Counter("generated_tokens", "tokens generated", registry=r)
        self.requests = Counter(
            "requests_finished", "requests finished, by reason", ["finish_reason"], registry=r
        )
        self.time_to_first_token = Histogram(
            "time_to_first_token_seconds",
            "from a request's arrival to its first token",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.time_per_output_token = Histogram(
            "time_per_output_token_seconds",
            "between a request's consecutive tokens",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )

    def decode_step(self, rows: int, slots: int, seconds: float) -> None:
        self.batch_occupancy.set(rows / slots)
        self.tokens_per_second.set(rows / seconds)
