"""`sluice.Pipeline`: zero copy, flat memory, errors, epochs, statistics, resume, the
torch adapter, `device="cuda"` without a GPU and `python -m sluice`."""

import gc
import os
import subprocess
import sys

import pytest
import torch

import sluice
import sluice.torch
from conftest import ROOT, normal_element

BENCH = ROOT / "examples" / "bench"
PIPES = ROOT / "tests" / "pipes"


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_tensors_are_the_pipelines_own_buffers(data):
    p = sluice.Pipeline(BENCH / "image_raw.pipe", files=f"{data}/image/*.tfrecord")
    batch = next(iter(p))
    pointers = p.last_pointers()
    assert set(pointers) == {"image", "label"}
    for field, tensor in batch.items():
        assert tensor.data_ptr() == pointers[field], field
    assert batch["image"].shape == (96, 64, 64, 3) and batch["image"].dtype == torch.float32


def test_numpy_and_raw_dlpack_share_the_buffer(data):
    import numpy

    p = sluice.Pipeline(BENCH / "image_raw.pipe", files=f"{data}/image/*.tfrecord", format="dlpack")
    batch = next(iter(p))
    label = numpy.from_dlpack(batch["label"])
    assert label.ctypes.data == p.last_pointers()["label"]
    with pytest.raises(BufferError):
        batch["label"].__dlpack__()  # exported once: the buffer moved to numpy
    image = torch.from_dlpack(batch["image"])
    assert image.data_ptr() == p.last_pointers()["image"]


def test_memory_of_a_long_run_stays_flat(data):
    # 96 records of 64×64×3 floats (4.7 MB) per batch: a leaked buffer per batch would
    # add gigabytes between the two readings.
    p = sluice.Pipeline(BENCH / "image_raw.pipe", files=f"{data}/image/*.tfrecord", epochs=1000)
    it = iter(p)
    total = 0.0
    for n in range(1, 1001):
        total += float(next(it)["image"][0, 0, 0, 0])
        if n == 100:
            gc.collect()
            early = rss()
    gc.collect()
    late = rss()
    assert late - early < 64 * 2**20, (early, late)
    assert p.stats()["batches"] == 1000


def test_a_bad_file_raises_compile_error_with_its_location(tmp_path):
    bad = tmp_path / "bad.pipe"
    bad.write_text("pipeline p(n: i64 = 3) {\n    range(n);\n    map { y = nosuch * 2; }\n}\n")
    with pytest.raises(sluice.CompileError) as e:
        sluice.Pipeline(bad)
    assert (e.value.file, e.value.line) == (str(bad), 3)
    assert e.value.column > 1 and e.value.code.startswith("E")
    assert "nosuch" in str(e.value) and f"{bad}:3:" in str(e.value)
    with pytest.raises(sluice.CompileError, match="missing.pipe"):
        sluice.Pipeline(tmp_path / "missing.pipe")


def test_bad_parameters_raise_parameter_error(data):
    with pytest.raises(sluice.ParameterError, match=r"parameter `n`: expected an integer, found `ten`"):
        sluice.Pipeline(PIPES / "combine.pipe", "evens", n="ten")
    with pytest.raises(sluice.ParameterError, match="unknown parameter `nope`"):
        sluice.Pipeline(PIPES / "combine.pipe", "evens", nope=1)
    with pytest.raises(sluice.ParameterError, match="no pipeline `nosuch`"):
        sluice.Pipeline(PIPES / "combine.pipe", "nosuch")
    with pytest.raises(sluice.ParameterError, match="name the pipeline"):
        sluice.Pipeline(PIPES / "combine.pipe")


def test_corrupt_data_raises_data_error_naming_file_and_record(data, tmp_path):
    src = sorted((data / "tabular").glob("*.tfrecord"))[0]
    blob = bytearray(src.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(blob))
    p = sluice.Pipeline(PIPES / "tabular.pipe", "eval", files=str(bad))
    with pytest.raises(sluice.DataError) as e:
        list(p)
    assert e.value.file == str(bad), str(e.value)
    assert isinstance(e.value.record, int) and e.value.record > 0


def test_epochs_run_more_passes_and_stats_count_them():
    p = sluice.Pipeline(PIPES / "combine.pipe", "zipped_batches", epochs=2)
    first = [normal_element(b) for b in p]
    assert len(first) == 6  # 10 rows in batches of 4, twice
    again = [normal_element(b) for b in p]  # the next two passes
    assert again == first
    s = p.stats()
    assert (s["records"], s["batches"], s["epoch"]) == (40, 12, 4)
    assert s["stages"] and all("name" in st for st in s["stages"])


def test_resume_goes_on_exactly(data):
    files = f"{data}/tabular/*.tfrecord"
    whole = [normal_element(b) for b in sluice.Pipeline(PIPES / "resume.pipe", "resume_tabular", files=files, epochs=2)]
    for k in (0, 7, len(whole) // 2 + 3):
        p = sluice.Pipeline(PIPES / "resume.pipe", "resume_tabular", files=files, epochs=2)
        it = iter(p)
        head = [normal_element(next(it)) for _ in range(k)]
        state = p.state()
        assert isinstance(state, bytes)
        rest_passes = 2 if k < len(whole) // 2 else 1
        resumed = sluice.Pipeline(
            PIPES / "resume.pipe", "resume_tabular", files=files, epochs=rest_passes, resume=state
        )
        assert head + [normal_element(b) for b in resumed] == whole, k
    with pytest.raises(sluice.ParameterError, match="does not match"):
        sluice.Pipeline(PIPES / "resume.pipe", "resume_tabular", files=files, batch_size=3, resume=state)


def test_torch_dataset_in_a_dataloader(data):
    ds = sluice.torch.dataset(BENCH / "image_raw.pipe", files=f"{data}/image/*.tfrecord")
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    batches = list(loader)
    assert len(batches) == 1 and batches[0]["image"].shape == (96, 64, 64, 3)
    assert ds.stats()["records"] == 96
    assert len(list(loader)) == 1  # the next epoch


def test_device_cuda_without_a_gpu_gives_the_cpu_twin(data, tool):
    from conftest import show

    params = {"files": f"{data}/image/*.tfrecord", "batch_size": 32}
    got = list(sluice.Pipeline(PIPES / "gpu_augment.pipe", device="cuda", **params))
    if torch.cuda.is_available():
        assert got[0]["image"].is_cuda
        got = [{k: v.cpu() for k, v in b.items()} for b in got]
    else:
        assert got[0]["image"].device.type == "cpu"
    shown = show(tool, PIPES / "gpu_augment.pipe", "gpu_augment", params)
    assert [normal_element(b) for b in got] == [normal_element(s) for s in shown]


def test_python_m_sluice_delegates_to_the_tool(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "sluice", *map(str, a)], capture_output=True, text=True)
    ok = run("check", PIPES / "combine.pipe")
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.pipe"
    bad.write_text("pipeline p() { range(3); map { y = nosuch; } }\n")
    r = run("check", bad)
    assert r.returncode == 1 and "nosuch" in r.stderr
    assert "== evens (logical) ==" in run("explain", PIPES / "combine.pipe").stdout
    shown = run("show", PIPES / "combine.pipe", "joined", "-n", "2")
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 2
