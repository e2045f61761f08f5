"""The model-call metrics: each call counted in its model's series (looked up once per model)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from deerflow.runtime import metrics


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_model_calls_tokens_and_latency_land_in_each_models_own_series() -> None:
    model, other = "metrics-test-model", "metrics-test-other"
    before = {(m, u): sample("deerflow_model_calls_total", model=m, usage=u)
              for m in (model, other) for u in ("reported", "unknown")}
    tokens_in = sample("deerflow_model_tokens_total", model=model, direction="input")
    tokens_out = sample("deerflow_model_tokens_total", model=model, direction="output")
    seen = sample("deerflow_model_call_seconds_count", model=model)
    for _ in range(3):
        metrics.model_call(model, {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}, 0.5)
    metrics.model_call(model, None, 0.1)
    metrics.model_call(other, None, -1.0)  # a clock step: counted, never negative
    assert sample("deerflow_model_calls_total", model=model, usage="reported") == before[(model, "reported")] + 3
    assert sample("deerflow_model_calls_total", model=model, usage="unknown") == before[(model, "unknown")] + 1
    assert sample("deerflow_model_calls_total", model=other, usage="unknown") == before[(other, "unknown")] + 1
    assert sample("deerflow_model_calls_total", model=other, usage="reported") == before[(other, "reported")]
    assert sample("deerflow_model_tokens_total", model=model, direction="input") == tokens_in + 21
    assert sample("deerflow_model_tokens_total", model=model, direction="output") == tokens_out + 6
    assert sample("deerflow_model_call_seconds_count", model=model) == seen + 4
    assert sample("deerflow_model_call_seconds_sum", model=other) == 0.0


def test_the_per_model_lookup_stays_bounded() -> None:
    for i in range(metrics._MODEL_SERIES_MAX + 5):
        metrics.model_call(f"metrics-bound-{i}", None, 0.0)
    assert len(metrics._MODEL_SERIES) <= metrics._MODEL_SERIES_MAX
    assert sample("deerflow_model_calls_total", model="metrics-bound-0", usage="unknown") >= 1  # still counted
