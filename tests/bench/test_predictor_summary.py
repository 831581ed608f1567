"""The summary's predictor keys, from the totals the engine processes leave."""

from revati.bench.results import predictor_summary


def test_shares_of_the_predicted_gpu_time():
    s = predictor_summary({"model_ns": 600, "roofline_ns": 200, "fixed_ns": 200,
                           "attention_by_batch_ns": 300_000_000, "unseen_kernel_ns": 250,
                           "launch_only_ns": 50, "collective_ns": 120})
    assert s["predictor_coverage"] == 600 / 800  # measured models against the roofline
    assert s["unseen_kernel_share"] == 250 / 1000  # of every predicted nanosecond
    assert s["launch_only_share"] == 50 / 1000
    assert s["collective_share"] == 120 / 1000
    assert s["attention_by_batch_s"] == 0.3


def test_no_prediction_gives_no_share():
    s = predictor_summary({})
    assert s == {"predictor_coverage": None, "attention_by_batch_s": 0.0,
                 "unseen_kernel_share": None, "launch_only_share": None,
                 "collective_share": None}
