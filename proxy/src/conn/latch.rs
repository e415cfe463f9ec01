//! [`Latched`]: a future that is polled again only after it has woken its task.
//!
//! A session waits on its cancellations (shutdown, KILL, the drain deadline) beside every
//! read of the client and every answer of the backend, so each statement polls them again
//! although they almost never fire. A cancellation future's poll takes two locks (the token's
//! node and its `Notify`'s waiter list), three times a statement.
//! `Latched` hands the inner future a waker of its own that records the wake-up; until that
//! waker has been called, a poll only re-registers the task's waker (two atomics) and answers
//! `Pending`. A future may only become ready after it has woken the waker it was polled
//! with, so nothing is missed; it may be polled once more than needed, never once less.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// What the inner future's waker does: note the wake-up and pass it on to the task.
struct Signal {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// `F`, polled only when it asked to be (see the module docs).
pub struct Latched<F> {
    fut: Pin<Box<F>>,
    signal: Arc<Signal>,
    waker: Waker,
}

impl<F: Future> Latched<F> {
    pub fn new(fut: F) -> Latched<F> {
        let signal = Arc::new(Signal {
            // The first poll polls `fut`, which registers the waker.
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Latched {
            fut: Box::pin(fut),
            waker: Waker::from(Arc::clone(&signal)),
            signal,
        }
    }
}

impl<F: Future> Future for Latched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        // The task's waker first: a wake-up after the check below then reaches this task.
        this.signal.task.register(cx.waker());
        if !this.signal.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let polled = this
            .fut
            .as_mut()
            .poll(&mut Context::from_waker(&this.waker));
        if polled.is_ready() {
            // A finished future is asked again directly (a cancellation stays ready).
            this.signal.woken.store(true, Ordering::Release);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    #[tokio::test]
    async fn a_cancellation_is_seen_after_any_number_of_idle_polls_and_stays_ready() {
        let token = CancellationToken::new();
        let mut fut = Box::pin(Latched::new(token.child_token().cancelled_owned()));
        for _ in 0..3 {
            assert!(futures_util::poll!(fut.as_mut()).is_pending());
        }
        let t = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            t.cancel();
        });
        tokio::time::timeout(Duration::from_secs(5), fut.as_mut())
            .await
            .expect("the cancellation wakes the latched future");
        assert!(futures_util::poll!(fut.as_mut()).is_ready());
    }

    #[tokio::test]
    async fn a_future_ready_at_once_is_ready_on_the_first_poll() {
        let token = CancellationToken::new();
        token.cancel();
        let mut fut = Box::pin(Latched::new(token.cancelled_owned()));
        assert!(futures_util::poll!(fut.as_mut()).is_ready());
    }
}
