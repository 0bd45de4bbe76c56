"""``Pipeline(..., engine=...)``: the engine the wheel ships gives what the compiled
library gives (elements, errors), ``auto`` picks a cached library, else the engine, and
compiles only what the engine refuses; ``stats()`` names the engine that ran."""

import time

import pytest

import sluice
from conftest import ROOT, normal_element, rows

BENCH = ROOT / "examples" / "bench"
PIPES = ROOT / "tests" / "pipes"

# (file, pipeline, parameters: `{data}` is the data directory, whether the engine must run
# it: a pipeline it does not run yet must be refused by name, never run differently). The
# jpeg case needs the engine's image operations (decode_jpeg, resize).
CASES = [
    (PIPES / "combine.pipe", "evens", {"n": 7}, True),
    (PIPES / "tabular.pipe", "eval", {"files": "{data}/tabular/*.tfrecord", "limit": 700}, True),
    (BENCH / "parse_tabular.pipe", "parse_tabular", {"files": "{data}/tabular/*.tfrecord"}, True),
    (BENCH / "jpeg.pipe", "jpeg", {"files": "{data}/jpeg/*.tfrecord"}, True),
]


def _elements(path, name, params, engine):
    p = sluice.Pipeline(path, name, engine=engine, **params)
    assert p.engine == engine
    got = [normal_element(e) for e in p]
    assert p.stats()["engine"] == engine
    return got


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0].stem}:{c[1]}" for c in CASES])
def test_the_engine_gives_the_compiled_librarys_elements(case, data):
    path, name, params, must_run = case
    params = {k: str(v).format(data=data) for k, v in params.items()}
    compiled = _elements(path, name, params, "compiled")
    try:
        interpreted = _elements(path, name, params, "interpreted")
    except sluice.SluiceError as e:
        assert not must_run, str(e)
        assert f"pipeline `{name}`: the engine does not run" in str(e), str(e)
        return
    assert len(interpreted) == len(compiled) > 0
    if "deterministic: false" in path.read_text():
        # `parse_tabular` and `jpeg`: the same batches' rows, in an order that may differ.
        assert sorted(r for e in interpreted for r in rows(e)) == sorted(r for e in compiled for r in rows(e))
        assert [len(rows(e)) for e in interpreted] == [len(rows(e)) for e in compiled]
    else:
        assert interpreted == compiled


def test_number_fields_are_the_engines_own_buffers(data):
    p = sluice.Pipeline(PIPES / "tabular.pipe", "eval", files=f"{data}/tabular/*.tfrecord", engine="interpreted")
    batch = next(iter(p))
    pointers = p.last_pointers()
    assert batch["x"].shape == (512, 16)
    assert batch["x"].data_ptr() == pointers["x"] != 0
    assert batch["label"].data_ptr() == pointers["label"] != 0


def test_errors_are_the_compiled_librarys(data, tmp_path):
    def error(engine, kind, **kw):
        with pytest.raises(kind) as e:
            p = sluice.Pipeline(engine=engine, **kw)
            list(p)
        return e.value

    for params in ({"n": "ten"}, {"nope": 1}):
        args = dict(path=PIPES / "combine.pipe", name="evens", **params)
        a, b = error("compiled", sluice.ParameterError, **args), error("interpreted", sluice.ParameterError, **args)
        assert str(a) == str(b)
    src = sorted((data / "tabular").glob("*.tfrecord"))[0]
    blob = bytearray(src.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(blob))
    args = dict(path=PIPES / "tabular.pipe", name="eval", files=str(bad))
    a, b = error("compiled", sluice.DataError, **args), error("interpreted", sluice.DataError, **args)
    assert (b.file, b.record) == (a.file, a.record) == (str(bad), a.record)
    assert isinstance(b.record, int) and b.record > 0
    assert str(b) == str(a)
    broken = tmp_path / "broken.pipe"
    broken.write_text("pipeline p(n: i64 = 3) {\n    range(n);\n    map { y = nosuch * 2; }\n}\n")
    c = error("interpreted", sluice.CompileError, path=broken)
    assert (c.file, c.line, c.code) == (str(broken), 3, error("compiled", sluice.CompileError, path=broken).code)


def test_auto_runs_the_engine_unless_a_library_is_built(tmp_path, monkeypatch):
    # A plan no earlier run built (an unused parameter's default makes it this run's own).
    path = tmp_path / "auto.pipe"
    salt = time.time_ns()
    path.write_text(f"pipeline auto_test(n: i64 = 5, salt: i64 = {salt}) {{\n    range(n);\n    map {{ y = value * 3 + 1; }}\n}}\n")
    first = sluice.Pipeline(path, engine="auto")
    assert (first.engine, first.library_path) == ("interpreted", None)
    ys = [int(e["y"]) for e in first]
    assert ys == [1, 4, 7, 10, 13] and first.stats()["engine"] == "interpreted"
    built = sluice.Pipeline(path, engine="compiled")
    assert [int(e["y"]) for e in built] == ys and built.stats()["engine"] == "compiled"
    again = sluice.Pipeline(path, engine="auto")
    assert (again.engine, again.library_path) == ("compiled", built.library_path)
    # The engine refuses nothing the code generator builds, so what `auto` cannot run at
    # once no library can run either, and it says why without trying cargo: Rust code of
    # the user's (`extern fn`), or what the code generator does not handle yet (E0600).
    monkeypatch.setenv("CARGO", str(tmp_path / "no-cargo"))
    refused = tmp_path / "refused.pipe"
    refused.write_text(
        "pipeline refused() {\n    extern fn my::f(x: i64) -> i64;\n    range(3);\n"
        "    map { value = my::f(value); }\n}\n"
    )
    for engine in ("interpreted", "auto"):
        with pytest.raises(sluice.SluiceError, match=r"calls `extern fn my::f`.*build\.rs"):
            sluice.Pipeline(refused, "refused", engine=engine)
    refused.write_text("pipeline refused() {\n    range(3);\n    map { h = cast(cast(value, f32), f16); }\n}\n")
    with pytest.raises(sluice.SluiceError) as e:
        sluice.Pipeline(refused, "refused", engine="auto")
    message = str(e.value)
    assert "E0600" in message and "cannot run cargo" not in message, message
    with pytest.raises(sluice.ParameterError, match="engine='fast'"):
        sluice.Pipeline(path, engine="fast")


def test_a_state_saved_by_one_backend_resumes_in_the_other(data):
    files = f"{data}/tabular/*.tfrecord"
    args = (PIPES / "resume.pipe", "resume_tabular")
    whole = [normal_element(b) for b in sluice.Pipeline(*args, files=files, epochs=2, engine="compiled")]
    for saver, resumer in (("interpreted", "compiled"), ("compiled", "interpreted")):
        p = sluice.Pipeline(*args, files=files, epochs=2, engine=saver)
        it = iter(p)
        k = len(whole) // 2 + 3
        head = [normal_element(next(it)) for _ in range(k)]
        resumed = sluice.Pipeline(*args, files=files, epochs=1, resume=p.state(), engine=resumer)
        assert resumed.engine == resumer
        assert head + [normal_element(b) for b in resumed] == whole, (saver, resumer)
    with pytest.raises(sluice.ParameterError, match="does not match"):
        sluice.Pipeline(*args, files=files, batch_size=3, resume=p.state(), engine="interpreted")
