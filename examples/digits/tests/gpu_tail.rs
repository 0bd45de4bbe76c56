//! The GPU tail of `digits_train_gpu` (features `torch` and `cuda`, a CUDA device): the
//! batches the device feed makes with the generated kernel on the GPU equal, bit for bit,
//! those of its CPU twin, over two epochs, with the batch on one device and split across
//! two replicas (the second part's rows start at its `row0`). Without a GPU (or the
//! `cuda` feature) it says so and checks that the feed falls back to the twin. Run on the
//! GPU machine by `scripts/gpu-check run`.

use sluice::runtime::stage::{Ctx, RuntimeOptions};
use sluice::torch::tch::{Device, Tensor};
use sluice::torch::{Feed, TailFeed, TensorBatch, cuda_device_count};

sluice::include_pipelines!("digits");

/// The committed data, or `$DIGITS_DATA` (the test binary run elsewhere: scripts/gpu-check).
fn data() -> String {
    std::env::var("DIGITS_DATA").unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/data").into())
}

fn params() -> digits_train_gpu::Params {
    digits_train_gpu::Params {
        files: format!("{}/train-*.tfrecord", data()),
        batch_size: 64,
        seed: 7,
        workers: 1,
        worker: 0,
    }
}

fn feed() -> impl Feed {
    let p = params();
    TailFeed::new(
        digits_train_gpu::host_dataset(&p).unwrap(),
        digits_train_gpu::dataset(&p).unwrap(),
        digits_train_gpu::device_tail(&p),
    )
}

/// Every batch of one pass on `devices` after its first `skip`, its parts put back together
/// on the CPU.
fn pass(feed: &impl Feed, epoch: u64, devices: &[Device], skip: u64) -> Vec<(Tensor, Tensor)> {
    let ctx = Ctx::new(&RuntimeOptions::default()).with_epoch(epoch);
    let batches = feed.feed(&ctx, devices, skip).unwrap();
    let mut out = Vec::new();
    while let Some(parts) = batches.next() {
        let parts: Vec<TensorBatch> = parts.unwrap();
        let cat = |name: &str| {
            let ts: Vec<Tensor> =
                parts.iter().map(|p| p.tensor(name).unwrap().to_device(Device::Cpu)).collect();
            Tensor::cat(&ts, 0)
        };
        out.push((cat("image"), cat("label")));
    }
    batches.finish().unwrap();
    out
}

#[test]
fn the_gpu_tail_equals_its_cpu_twin() {
    let p = params();
    let tail = digits_train_gpu::device_tail(&p);
    assert_eq!(tail.kernels.len(), 1);
    assert_eq!(
        (tail.kernels[0].field, tail.kernels[0].in_shape, tail.kernels[0].out_shape),
        ("image", &[10, 10, 1][..], &[1, 8, 8][..])
    );
    let twin = digits_train_gpu::dataset(&p).unwrap();
    let gpus = cuda_device_count();
    let feed = TailFeed::new(
        digits_train_gpu::host_dataset(&p).unwrap(),
        digits_train_gpu::dataset(&p).unwrap(),
        tail,
    );
    if gpus == 0 || feed.cpu_reason(&[Device::Cuda(0)]).is_some() {
        let why = feed.cpu_reason(&[Device::Cuda(0)]).unwrap_or_else(|| "no CUDA device".into());
        sluice::runtime::testing::skip_gpu_test("the GPU comparison", &why);
        // The feed falls back to the twin: the same batches as the twin itself.
        let (a, b) = (pass(&feed, 1, &[Device::Cpu], 0), pass(&twin, 1, &[Device::Cpu], 0));
        assert_eq!(a.len(), b.len());
        for ((ai, al), (bi, bl)) in a.iter().zip(&b) {
            assert!(ai.equal(bi) && al.equal(bl));
        }
        // Resumed after 5 batches: the rest of the same pass, the same augmentation.
        let c = pass(&feed, 1, &[Device::Cpu], 5);
        assert_eq!(c.len(), b.len() - 5);
        for ((ci, cl), (bi, bl)) in c.iter().zip(&b[5..]) {
            assert!(ci.equal(bi) && cl.equal(bl));
        }
        return;
    }
    for devices in [vec![Device::Cuda(0)], vec![Device::Cuda(0), Device::Cuda(gpus.min(2) - 1)]] {
        for epoch in 0..2 {
            let (gpu, cpu) = (pass(&feed, epoch, &devices, 0), pass(&twin, epoch, &[Device::Cpu], 0));
            assert_eq!(gpu.len(), cpu.len(), "{devices:?} epoch {epoch}");
            for (b, ((gi, gl), (ci, cl))) in gpu.iter().zip(&cpu).enumerate() {
                assert_eq!(gi.size(), ci.size());
                assert!(
                    gi.equal(ci),
                    "{devices:?} epoch {epoch} batch {b}: the kernel's images differ from the twin's"
                );
                assert!(gl.equal(cl), "{devices:?} epoch {epoch} batch {b}: labels");
            }
            // Resumed after 5 batches: the kernels draw with the batches' own indices.
            let resumed = pass(&feed, epoch, &devices, 5);
            assert_eq!(resumed.len(), cpu.len() - 5);
            for (b, ((gi, gl), (ci, cl))) in resumed.iter().zip(&cpu[5..]).enumerate() {
                assert!(gi.equal(ci) && gl.equal(cl), "{devices:?} epoch {epoch}: resumed batch {b} differs");
            }
        }
    }
}

#[test]
fn a_feed_is_also_any_pipeline_of_named_columns() {
    let _ = feed();
    let test = digits_test::dataset(&digits_test::Params {
        files: format!("{}/test-*.tfrecord", data()),
        batch_size: 360,
        workers: 1,
        worker: 0,
    })
    .unwrap();
    let batches = pass(&test, 0, &[Device::Cpu], 0);
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].0.size(), [360, 1, 8, 8]);
}
