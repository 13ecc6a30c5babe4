"""The server's counters, gauges and histograms, written in Prometheus' text format (GET /metrics).

Small and dependency-free: the few series kiln serve has do not need prometheus_client.
"""

from __future__ import annotations

import threading

# Seconds: time to first token spans queueing and prefill; inter-token latency one decode step.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Histogram:
    def __init__(self, buckets):
        self.buckets = tuple(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, v: float) -> None:
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.sum += v
        self.count += 1

    def lines(self, name: str) -> list:
        out, cumulative = [], 0
        for b, c in zip(self.buckets, self.counts):
            cumulative += c
            out.append(f'{name}_bucket{{le="{b}"}} {cumulative}')
        out.append(f'{name}_bucket{{le="+Inf"}} {self.count}')
        out.append(f"{name}_sum {self.sum:.6f}")
        out.append(f"{name}_count {self.count}")
        return out


class Metrics:
    """Updated from the event loop and the worker thread (one lock)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.requests: dict = {}  # (route, status) -> count
        self.finished: dict = {}  # finish reason -> count (choices, i.e. engine requests)
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.rejected_queue_full = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)

    def request(self, route: str, status: int) -> None:
        with self.lock:
            key = (route, status)
            self.requests[key] = self.requests.get(key, 0) + 1

    def finish(self, reason: str, prompt_tokens: int, completion_tokens: int) -> None:
        with self.lock:
            self.finished[reason] = self.finished.get(reason, 0) + 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens

    def first_token(self, seconds: float) -> None:
        with self.lock:
            self.ttft.observe(seconds)

    def inter_token(self, seconds: float) -> None:
        with self.lock:
            self.itl.observe(seconds)

    def render(self, *, queued: int, active: int, slots: int) -> str:
        with self.lock:
            lines = ["# HELP kiln_requests_total HTTP requests answered, by route and status code.",
                     "# TYPE kiln_requests_total counter"]
            for (route, status), n in sorted(self.requests.items()):
                lines.append(f'kiln_requests_total{{route="{route}",status="{status}"}} {n}')
            lines += ["# HELP kiln_generations_total Generations (one per choice) ended, by finish reason.",
                      "# TYPE kiln_generations_total counter"]
            for reason, n in sorted(self.finished.items()):
                lines.append(f'kiln_generations_total{{finish_reason="{reason}"}} {n}')
            lines += ["# HELP kiln_prompt_tokens_total Prompt tokens of the generations ended.",
                      "# TYPE kiln_prompt_tokens_total counter", f"kiln_prompt_tokens_total {self.prompt_tokens}",
                      "# HELP kiln_completion_tokens_total Tokens generated.",
                      "# TYPE kiln_completion_tokens_total counter",
                      f"kiln_completion_tokens_total {self.completion_tokens}",
                      "# HELP kiln_queue_depth Requests waiting for a slot.", "# TYPE kiln_queue_depth gauge",
                      f"kiln_queue_depth {queued}",
                      "# HELP kiln_active_slots Slots generating.", "# TYPE kiln_active_slots gauge",
                      f"kiln_active_slots {active}",
                      "# HELP kiln_slots Slots of the engine.", "# TYPE kiln_slots gauge", f"kiln_slots {slots}",
                      "# HELP kiln_time_to_first_token_seconds From the request's arrival to its first token.",
                      "# TYPE kiln_time_to_first_token_seconds histogram"]
            lines += self.ttft.lines("kiln_time_to_first_token_seconds")
            lines += ["# HELP kiln_inter_token_latency_seconds Between two tokens of one generation.",
                      "# TYPE kiln_inter_token_latency_seconds histogram"]
            lines += self.itl.lines("kiln_inter_token_latency_seconds")
        return "\n".join(lines) + "\n"
