"""`sluice.Pipeline` yields exactly what `sluice show -n all` prints, element for
element: the bench pipelines on `sluice gen` data and corpus pipelines of tests/pipes."""

import pytest

import sluice
from conftest import ROOT, normal_element, rows, show

BENCH = ROOT / "examples" / "bench"
PIPES = ROOT / "tests" / "pipes"

# (file, pipeline, parameters: `{data}` is the data directory, in any order?)
CASES = [
    (BENCH / "jpeg.pipe", "jpeg", {"files": "{data}/jpeg/*.tfrecord"}, True),
    (BENCH / "image_raw.pipe", "image_raw", {"files": "{data}/image/*.tfrecord"}, True),
    (BENCH / "parse_tabular.pipe", "parse_tabular", {"files": "{data}/tabular/*.tfrecord"}, True),
    (BENCH / "read.pipe", "read", {"files": "{data}/tabular/*.tfrecord"}, "elements"),
    (PIPES / "tabular.pipe", "eval", {"files": "{data}/tabular/*.tfrecord", "limit": 700}, False),
    (PIPES / "resume.pipe", "resume_tabular", {"files": "{data}/tabular/*.tfrecord"}, False),
    (PIPES / "resume.pipe", "resume_image", {"files": "{data}/image/*.tfrecord"}, False),
    (PIPES / "combine.pipe", "zipped_batches", {}, False),
    (PIPES / "combine.pipe", "zipped", {}, False),
    (PIPES / "combine.pipe", "joined", {}, False),
    (PIPES / "csv.pipe", "table", {"files": "{data}/csv/*.csv"}, False),
    (PIPES / "csv.pipe", "positional", {"files": "{data}/semi/*.csv"}, False),
]


def _ids():
    return [f"{c[0].stem}:{c[1]}" for c in CASES]


@pytest.mark.parametrize("case", CASES, ids=_ids())
def test_elements_equal_sluice_show(case, tool, data):
    path, name, params, any_order = case
    params = {k: str(v).format(data=data) for k, v in params.items()}
    shown = show(tool, path, name, params)
    got = list(sluice.Pipeline(path, name, **params))
    assert len(got) == len(shown) > 0
    ours = [normal_element(g, s) for g, s in zip(got, shown)]
    theirs = [normal_element(s, s) for s in shown]
    if any_order == "elements":
        assert sorted(map(repr, ours)) == sorted(map(repr, theirs))
    elif any_order:
        # `deterministic: false` readers: the same batches' rows, in any order.
        assert sorted(r for e in ours for r in rows(e)) == sorted(r for e in theirs for r in rows(e))
        assert [len(rows(e)) for e in ours][:-1] == [len(rows(e)) for e in theirs][:-1]
    else:
        assert ours == theirs
