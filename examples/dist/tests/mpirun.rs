//! Multi-process training under `mpirun -np N` on this machine (shared memory and
//! loopback only): `dist-check` ranks against one process on the same global batches,
//! every record once per epoch across the ranks, resume per rank and on another number of
//! ranks (the positions redealt; the parameters those of one process on the same global
//! batches), and the errors that
//! must stop every rank instead of leaving the others waiting.
//!
//! Needs Open MPI's `mpirun` (scripts/setup-mpi). Without it these tests say so and pass,
//! unless `SLUICE_REQUIRE_MPI=1` (scripts/test sets it), which makes that a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_dist-check");

/// The data of a run: 961 records in 3 files. Two ranks with 32 rows each per step get
/// 481 and 480 records: 16 batches and 15, so the last step has one rank's single row.
const RECORDS: u64 = 961;

fn mpirun_present() -> bool {
    let found = Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var("SLUICE_REQUIRE_MPI").as_deref() != Ok("1"),
            "SLUICE_REQUIRE_MPI=1 but no `mpirun` on PATH (scripts/setup-mpi installs Open MPI)"
        );
        eprintln!("skipped: no `mpirun` on PATH (scripts/setup-mpi installs Open MPI)");
    }
    found
}

/// Runs `cmd`, killing it (and failing) if it takes over two minutes: a hang is a bug.
fn run(mut cmd: Command) -> Output {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("{cmd:?} hung; stderr:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// `mpirun -np N dist-check ARGS`, on this machine's shared memory and loopback alone.
fn mpirun(np: usize, args: &[&str]) -> Output {
    let mut cmd = Command::new("mpirun");
    cmd.args(["-np", &np.to_string(), "--oversubscribe"])
        .args(["--mca", "btl", "self,vader", "--mca", "oob_tcp_if_include", "lo"])
        // Containers often forbid the cross-process memory copies (CMA) of shared memory.
        .args(["--mca", "btl_vader_single_copy_mechanism", "none"])
        .arg(EXE)
        .args(args)
        // Containers and CI machines often run as root, which Open MPI refuses by default.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    run(cmd)
}

fn exe(args: &[&str]) -> Output {
    let mut cmd = Command::new(EXE);
    cmd.args(args);
    run(cmd)
}

fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn data(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    ok(exe(&["gen", "--out", data.to_str().unwrap(), "--records", &RECORDS.to_string()]), "gen");
    data
}

/// `(epoch, step) -> ids` of one ids file.
fn steps(path: &Path) -> BTreeMap<(u64, u64), Vec<u64>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let v: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            ((v[0], v[1]), v[2..].to_vec())
        })
        .collect()
}

/// The lines of one ids file in order: `(epoch, ids)` (a resumed run writes the steps of
/// its epoch again from 0).
fn rows(path: &Path) -> Vec<(u64, Vec<u64>)> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            let v: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            (v[0], v[2..].to_vec())
        })
        .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn two_ranks_train_as_one_process_on_the_same_global_batches() {
    if !mpirun_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = data(dir.path());
    let (a, b) = (dir.path().join("mpi"), dir.path().join("one"));
    let log = ok(mpirun(2, &["train", "--data", s(&data), "--out", s(&a), "--epochs", "3"]), "mpirun -np 2");
    ok(exe(&["train", "--data", s(&data), "--out", s(&b), "--epochs", "3", "--reference", "2"]), "reference");

    // It learnt something: the compared models are not two untrained ones.
    assert!(log.contains("2 rank(s), gradients over mpi"), "{log}");
    let losses: Vec<f64> = log
        .lines()
        .filter(|l| l.starts_with("epoch "))
        .map(|l| l.split("loss ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(losses.len(), 3, "{log}");
    assert!(losses[2] < 0.7 * losses[0], "the loss did not fall: {losses:?}");

    // The same parameters as one process on the same global batches, to float rounding.
    let cmp = ok(
        exe(&[
            "compare",
            s(&a.join("model.safetensors")),
            s(&b.join("model.safetensors")),
            "--tolerance",
            "1e-5",
        ]),
        "compare",
    );
    assert!(cmp.contains("largest difference"), "{cmp}");

    // Every record once per epoch across the ranks; the ranks' batches at each step are
    // the one process's global batch.
    let ranks = [steps(&a.join("ids.rank0.txt")), steps(&a.join("ids.rank1.txt"))];
    let one = steps(&b.join("ids.reference.txt"));
    for epoch in 0..3 {
        let mut seen: Vec<u64> = Vec::new();
        let mut counts = [0usize; 2];
        for (r, rank) in ranks.iter().enumerate() {
            for ((e, _), ids) in rank {
                if *e == epoch {
                    seen.extend(ids);
                    counts[r] += ids.len();
                }
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..RECORDS).collect::<Vec<_>>(), "epoch {epoch}: not every record exactly once");
        assert_eq!(counts, [481, 480], "epoch {epoch}: the shards are not exact");
    }
    assert_eq!(one.len(), 3 * 16, "the reference's steps");
    for (key, global) in &one {
        let mut union: Vec<u64> =
            ranks.iter().flat_map(|r| r.get(key).cloned().unwrap_or_default()).collect();
        let mut global = global.clone();
        union.sort_unstable();
        global.sort_unstable();
        assert_eq!(union, global, "step {key:?}: the ranks' rows are not the global batch");
    }
    // The last step of an epoch: rank 1's shard has run out, rank 0 has one row.
    assert_eq!(ranks[0].get(&(0, 15)).map(Vec::len), Some(1));
    assert_eq!(ranks[1].get(&(0, 15)).map(Vec::len), Some(0));
}

#[test]
fn a_stopped_job_resumes_each_rank_where_it_stopped() {
    if !mpirun_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = data(dir.path());
    let (whole, parts) = (dir.path().join("whole"), dir.path().join("parts"));
    // Plain SGD: the optimizer keeps no state, so the resumed model must be the same.
    let common = ["train", "--data", s(&data), "--epochs", "3", "--momentum", "0"];
    ok(mpirun(2, &[&common[..], &["--out", s(&whole)]].concat()), "the whole run");
    // Stop inside epoch 2 (16 steps an epoch), then resume in new processes.
    let stopped =
        ok(mpirun(2, &[&common[..], &["--out", s(&parts), "--stop-after-steps", "21"]].concat()), "stop");
    assert!(stopped.contains("stopped after 21 steps at epoch 2 step 5"), "{stopped}");
    // Every rank's position, gathered into rank 0's one file beside the model.
    let states = std::fs::read(parts.join("ckpt.safetensors.state")).expect("the checkpoint's states");
    assert_eq!(&states[..8], b"SLSS\x02\0\0\0", "not the states of two ranks");
    // The same checkpoint, to be resumed by three ranks and by one (below).
    let copies = [3, 1].map(|n| {
        let to = dir.path().join(format!("resume-on-{n}"));
        std::fs::create_dir(&to).unwrap();
        for e in std::fs::read_dir(&parts).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
        (n, to)
    });
    ok(mpirun(2, &[&common[..], &["--out", s(&parts), "--resume"]].concat()), "resume");
    for r in 0..2 {
        let ids = format!("ids.rank{r}.txt");
        assert_eq!(steps(&parts.join(&ids)), steps(&whole.join(&ids)), "rank {r} trained on other rows");
    }
    ok(
        exe(&[
            "compare",
            s(&whole.join("model.safetensors")),
            s(&parts.join("model.safetensors")),
            "--tolerance",
            "0",
        ]),
        "compare",
    );

    // The checkpoint of two ranks, resumed by three and by one: the positions are redealt.
    // Epoch 2 (interrupted at its step 5 by both ranks): what the two ranks trained on
    // before and what the new ranks trained on after are every record, each once. Epoch
    // 3: each new rank trains on what a fresh run of that many ranks does.
    for (n, to) in &copies {
        let resumed = [&common[..], &["--out", s(to), "--resume"]].concat();
        let out = if *n == 1 { exe(&resumed) } else { mpirun(*n, &resumed) };
        ok(out, &format!("resume on {n} rank(s)"));
        let fresh = dir.path().join(format!("fresh-{n}"));
        let args = [&common[..], &["--out", s(&fresh)]].concat();
        ok(if *n == 1 { exe(&args) } else { mpirun(*n, &args) }, &format!("a fresh run on {n}"));
        let mut epoch2: Vec<u64> = (0..2.max(*n))
            .flat_map(|r| rows(&to.join(format!("ids.rank{r}.txt"))))
            .filter(|(epoch, _)| *epoch == 1)
            .flat_map(|(_, ids)| ids)
            .collect();
        epoch2.sort_unstable();
        assert_eq!(
            epoch2,
            (0..RECORDS).collect::<Vec<_>>(),
            "resumed on {n}: epoch 2 is not every record once"
        );
        for r in 0..*n {
            let last = |d: &Path| -> Vec<Vec<u64>> {
                rows(&d.join(format!("ids.rank{r}.txt")))
                    .into_iter()
                    .filter(|(e, _)| *e == 2)
                    .map(|(_, i)| i)
                    .collect()
            };
            assert_eq!(last(to), last(&fresh), "resumed on {n}: rank {r}'s epoch 3 is not a fresh run's");
        }
        // The parameters: those of one process whose global batches were the two shards'
        // for 21 steps, then the redealt n shards' (plain SGD; the global batch of 64
        // splits over 2, 3 and 1 ranks alike).
        let reference = dir.path().join(format!("reference-2-then-{n}"));
        let args =
            [&common[..], &["--out", s(&reference), "--reference", "2", "--reshard", &format!("21:{n}")]];
        let log = ok(exe(&args.concat()), &format!("the reference that reshards to {n}"));
        assert!(log.contains(&format!("redealt the positions of 2 shards to {n} after 21 steps")), "{log}");
        let cmp = exe(&[
            "compare",
            s(&to.join("model.safetensors")),
            s(&reference.join("model.safetensors")),
            "--tolerance",
            "1e-5",
        ]);
        ok(
            cmp,
            &format!("resumed on {n}: the parameters differ from one process's on the same global batches"),
        );
    }

    // The states cut short: every rank says which file, and the job stops.
    let file = parts.join("ckpt.safetensors.state");
    std::fs::write(&file, &states[..states.len() - 3]).unwrap();
    let out = mpirun(2, &[&common[..], &["--out", s(&parts), "--resume"]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("ckpt.safetensors.state: a set of pipeline states cut short"), "{err}");
}

#[test]
fn a_corrupt_record_stops_every_rank_with_its_place() {
    if !mpirun_present() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = data(dir.path());
    // Damage a payload byte in the middle of the second file (its CRC no longer matches).
    let file = data.join("tabular-00001-of-00003.tfrecord");
    let mut bytes = std::fs::read(&file).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();
    let out = mpirun(2, &["train", "--data", s(&data), "--out", s(&dir.path().join("out"))]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a corrupt record went unnoticed");
    assert!(err.contains("tabular-00001-of-00003.tfrecord"), "the error does not name the file:\n{err}");
}

#[test]
fn a_rank_whose_shard_is_empty_still_steps_and_reports() {
    if !mpirun_present() {
        return;
    }
    // Two records for three ranks: rank 2 has no batch at all, yet joins every step.
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    ok(exe(&["gen", "--out", s(&data), "--records", "2", "--files", "1"]), "gen");
    let out = dir.path().join("out");
    let log = ok(mpirun(3, &["train", "--data", s(&data), "--out", s(&out)]), "mpirun -np 3");
    // Rank 0 reports the whole job's rows and metrics (learnt by the empty rank too).
    assert!(log.contains("epoch 2: 2 examples in 1 steps"), "{log}");
    assert!(log.contains("accuracy"), "{log}");
    let empty = steps(&out.join("ids.rank2.txt"));
    assert_eq!(empty.values().map(Vec::len).sum::<usize>(), 0, "rank 2 had rows: {empty:?}");
    assert_eq!(empty.len(), 2, "rank 2 did not take part in each epoch's step");
}
