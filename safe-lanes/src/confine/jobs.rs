//! Confined commands in the background: started now, followed by polls, stopped on demand.
//!
//! A client that waits a fixed time for every answer (60 s is common) cannot run a longer
//! command in the foreground. [`Jobs`] lets it start the command, poll for its output, and
//! stop it. A job is a [`Confined`] command like any other — the same sandbox, the same live
//! revocation, recorded the same way — that runs on its own thread.
//!
//! Bounds: at most [`Jobs::new`]'s `max` jobs exist at once (running, or finished and not yet
//! reported), each keeping at most its [`Limits::max_output`](crate::Limits) of each stream.
//! When the [`Jobs`] is dropped (the gateway ends), every job still running is stopped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::{Confined, ConfinedOutcome};
use crate::control::{Control, Mark, NewOutput};
use crate::error::{Error, Result, Shown};
use crate::grants::Session;
use crate::sync::lock;

/// How long [`Jobs::stop`] waits for a stopped job to end (the process group is killed within
/// the watch period; this covers a slow machine).
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The background jobs of one session (module docs).
#[derive(Debug)]
pub(crate) struct Jobs {
    session: Arc<Session>,
    max: usize,
    next: AtomicU64,
    jobs: Mutex<HashMap<String, Job>>,
}

#[derive(Debug)]
struct Job {
    control: Control,
    /// How much output the last report included.
    mark: Mark,
    done: Arc<Done>,
}

/// A job's result, once its thread has it.
#[derive(Debug, Default)]
struct Done {
    result: Mutex<Slot>,
    ended: Condvar,
}

/// Where a job is in its life, as its reports see it.
#[derive(Debug, Default)]
enum Slot {
    /// Its command has not ended.
    #[default]
    Running,
    /// It ended; no report has said so yet.
    Ended(Box<Result<ConfinedOutcome>>),
    /// A report said how it ended: any other (a waiter on another thread) finds it gone.
    Reported,
}

/// How a job is doing, with the output that is new since its previous report.
#[derive(Debug)]
pub(crate) struct JobReport {
    /// The job's id.
    pub id: String,
    /// Time since it started.
    pub elapsed: Duration,
    /// Output new since the previous report (the first report of a job has all of it so far).
    pub output: NewOutput,
    /// How it ended, once it has (the job is then forgotten: its id is no longer known).
    pub ended: Option<ConfinedOutcome>,
}

impl Jobs {
    /// Background jobs run in `session`, at most `max` at once.
    pub(crate) fn new(session: Arc<Session>, max: usize) -> Self {
        Self {
            session,
            max,
            next: AtomicU64::new(1),
            jobs: Mutex::new(HashMap::new()),
        }
    }

    /// Start `command` in the background and report it (usually still running).
    ///
    /// # Errors
    ///
    /// `too_many_jobs` when `max` jobs exist; otherwise what [`Confined::run`] refuses before
    /// the command starts (an unknown alias, no sandbox, a program that cannot be started).
    pub(crate) fn start(&self, command: Confined) -> Result<JobReport> {
        let mut jobs = self.lock();
        if jobs.len() >= self.max {
            return Err(Error::TooManyJobs { limit: self.max });
        }
        let control = Control::new();
        let done = Arc::new(Done::default());
        let (session, job_control, job_done) = (
            Arc::clone(&self.session),
            control.clone(),
            Arc::clone(&done),
        );
        std::thread::Builder::new()
            .name("job".into())
            .spawn(move || {
                let result = command.run_with(&session, &job_control);
                *lock(&job_done.result) = Slot::Ended(Box::new(result));
                job_done.ended.notify_all();
            })
            .map_err(|e| Error::io("spawn", "a job thread", e))?;
        // Until the process exists, a refusal is the caller's answer, not a job's outcome.
        control.wait_spawned_or_ended();
        if !control.spawned() {
            // It returned without a process: its refusal is about to be in `done`.
            drop(done.wait(STOP_WAIT));
        }
        let failed = {
            let mut result = lock(&done.result);
            if matches!(&*result, Slot::Ended(r) if r.is_err()) {
                std::mem::take(&mut *result)
            } else {
                Slot::Running
            }
        };
        if let Slot::Ended(r) = failed
            && let Err(e) = *r
        {
            return Err(e);
        }
        let id = format!("job-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let job = Job {
            control,
            mark: Mark::default(),
            done,
        };
        jobs.insert(id.clone(), job);
        drop(jobs);
        self.report(&id, Duration::ZERO)
    }

    /// Report job `id`, first waiting up to `wait` for it to end. A job that has ended is
    /// reported one last time and then forgotten: a report waiting on another thread at that
    /// moment returns at once, `not_found`.
    ///
    /// # Errors
    ///
    /// `not_found` for an id that is unknown (or already reported as ended); an error the
    /// job's command ended with.
    pub(crate) fn report(&self, id: &str, wait: Duration) -> Result<JobReport> {
        let done = Arc::clone(&self.job(id)?.done);
        let ended = {
            let mut slot = done.wait(wait);
            match std::mem::replace(&mut *slot, Slot::Reported) {
                Slot::Running => {
                    *slot = Slot::Running;
                    None
                }
                Slot::Ended(result) => Some(*result),
                Slot::Reported => return Err(unknown(id)),
            }
        };
        let mut jobs = self.lock();
        let job = jobs.get_mut(id).ok_or_else(|| unknown(id))?;
        let (output, mark) = job.control.output_since(job.mark);
        job.mark = mark;
        let elapsed = job.control.elapsed();
        let ended = match ended {
            None => None,
            Some(result) => {
                jobs.remove(id);
                Some(result?)
            }
        };
        Ok(JobReport {
            id: id.to_owned(),
            elapsed,
            output,
            ended,
        })
    }

    /// Stop job `id` (its whole process group), wait for it to end, and report it.
    ///
    /// # Errors
    ///
    /// As [`Jobs::report`].
    pub(crate) fn stop(&self, id: &str, why: &str) -> Result<JobReport> {
        self.job(id)?.control.stop(why);
        self.report(id, STOP_WAIT)
    }

    /// The control of job `id`, or `not_found`.
    fn job(&self, id: &str) -> Result<JobRef> {
        let jobs = self.lock();
        let job = jobs.get(id).ok_or_else(|| unknown(id))?;
        Ok(JobRef {
            control: job.control.clone(),
            done: Arc::clone(&job.done),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Job>> {
        lock(&self.jobs)
    }
}

impl Drop for Jobs {
    /// Stop every job still running, and wait (up to 10 s each) until it has ended
    /// and recorded how: none outlives the gateway that started it, and none is left to be
    /// closed as `ended_unknown`.
    fn drop(&mut self) {
        let jobs = std::mem::take(&mut *self.lock());
        for job in jobs.values() {
            job.control.stop("the server stopped");
        }
        for job in jobs.values() {
            drop(job.done.wait(STOP_WAIT));
        }
    }
}

impl Done {
    /// The result slot, once the job has ended (or been reported) or `wait` has passed
    /// (still running then).
    fn wait(&self, wait: Duration) -> MutexGuard<'_, Slot> {
        let deadline = Instant::now() + wait;
        let mut result = lock(&self.result);
        while matches!(*result, Slot::Running) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            result = self
                .ended
                .wait_timeout(result, left)
                .map_or_else(|p| p.into_inner().0, |(guard, _)| guard);
        }
        result
    }
}

/// What [`Jobs::job`] hands out without holding the table's lock.
struct JobRef {
    control: Control,
    done: Arc<Done>,
}

fn unknown(id: &str) -> Error {
    Error::NotFound {
        path: Shown::text(id),
        why: "no such background job (a finished job is forgotten once reported)".into(),
    }
}
