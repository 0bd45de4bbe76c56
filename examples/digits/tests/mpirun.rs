//! The main job as a multi-process job: `mpirun -np 2 digits` on this machine (shared
//! memory and loopback only), each rank training on its shard of the digits, reaches the
//! accuracy of one process. (`examples/dist/tests/mpirun.rs` checks the parameters against
//! one process exactly, record by record.)
//!
//! Needs Open MPI's `mpirun` (scripts/setup-mpi); without it this says so and passes,
//! unless `SLUICE_REQUIRE_MPI=1` (scripts/test), which makes that a failure.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `mpirun -np 2 digits ARGS`, or `None` (said) without `mpirun`; fails if it hangs.
fn mpirun_digits(args: &[&str]) -> Option<Output> {
    if !Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var("SLUICE_REQUIRE_MPI").as_deref() != Ok("1"),
            "SLUICE_REQUIRE_MPI=1 but no `mpirun` on PATH (scripts/setup-mpi installs Open MPI)"
        );
        eprintln!("skipped: no `mpirun` on PATH (scripts/setup-mpi installs Open MPI)");
        return None;
    }
    let mut child = Command::new("mpirun")
        .args([
            "-np",
            "2",
            "--oversubscribe",
            "--mca",
            "btl",
            "self,vader",
            "--mca",
            "oob_tcp_if_include",
            "lo",
        ])
        // Containers often forbid the cross-process memory copies (CMA) of shared memory.
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .arg(env!("CARGO_BIN_EXE_digits"))
        .args(args)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun");
    let deadline = Instant::now() + Duration::from_secs(300);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("mpirun -np 2 digits {args:?} hung");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(child.wait_with_output().expect("output"))
}

#[test]
fn two_ranks_train_the_digits_to_the_accuracy_of_one() {
    let Some(out) = mpirun_digits(&["--no-progress", "--epochs", "15"]) else { return };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("in each of 2 MPI ranks"), "{stdout}");
    assert!(stdout.contains("gradients summed over 2 ranks with mpi"), "{stdout}");
    // Rank 0 alone reports, and the epochs count every rank's rows: 1437 a pass.
    assert_eq!(stdout.matches("test accuracy: ").count(), 1, "{stdout}");
    assert!(stdout.contains("epoch 15: 1437 examples in 23 steps"), "{stdout}");
    let accuracy: f64 = stdout.rsplit("test accuracy: ").next().unwrap().trim().parse().unwrap();
    assert!(accuracy >= 0.95, "test accuracy {accuracy} with two ranks:\n{stdout}");
}

#[test]
fn a_global_batch_smaller_than_the_ranks_is_refused() {
    let Some(out) = mpirun_digits(&["--no-progress", "--batch-size", "1"]) else { return };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("a global batch of 1 rows for 2 ranks: each rank needs at least one"),
        "{stderr}"
    );
}
