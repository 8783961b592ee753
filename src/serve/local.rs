//! What one worker of the server keeps between requests (`Local`: where it
//! asks, the read-only index or with `--pg` the team store, opened when
//! first needed, and its search readers)
//! and the places for searches all workers share (`Searches`), so a page
//! is always left a worker.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::query::QueryError;
use crate::query::search::HeadStart;
use crate::query::source::{Source, Team};
use crate::store::{Index, StoreError};

/// What one worker keeps between requests: its connection to the index
/// (opened when first needed, so the server starts before the first sync
/// made the database) and the shard readers of its searches.
pub struct Local {
    pub db: PathBuf,
    /// The team store asked instead of the index (`serve --pg`).
    team: Option<Team>,
    source: Option<Source>,
    pub head: HeadStart,
    searches: Searches,
    /// The address of the request being answered, to notice when its
    /// client goes away (`serve::client`).
    pub client: Option<std::net::SocketAddr>,
}

/// The searches running on all workers, how many may (one worker is always
/// left for the pages, however many searches are asked for at once), and
/// how long each may run (`serve --search-timeout`; `None`: no limit).
#[derive(Clone)]
pub struct Searches {
    running: Arc<AtomicUsize>,
    max: usize,
    budget: Option<Duration>,
}

/// A search's place among `Searches`, given back when dropped.
pub struct SearchSlot(Arc<AtomicUsize>);

impl Drop for SearchSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Searches {
    pub fn new(workers: usize, budget: Option<Duration>) -> Searches {
        Searches {
            running: Arc::default(),
            max: workers.saturating_sub(1).max(1),
            budget,
        }
    }
}

impl Local {
    pub fn new(db: PathBuf, team: Option<Team>, searches: Searches) -> Local {
        Local {
            db,
            team,
            source: None,
            head: HeadStart::default(),
            searches,
            client: None,
        }
    }

    /// A place for one search, or `None` when as many run as may.
    /// How long one search may run.
    pub fn search_budget(&self) -> Option<Duration> {
        self.searches.budget
    }

    pub fn search_slot(&self) -> Option<SearchSlot> {
        let Searches { running, max, .. } = &self.searches;
        let taken = running.fetch_add(1, Ordering::SeqCst);
        let slot = SearchSlot(Arc::clone(running));
        (taken < *max).then_some(slot)
    }

    /// Where questions are answered (the index, or the team store with
    /// `--pg`) and the search readers, opening it if needed.
    pub fn parts(&mut self) -> Result<(&mut Source, &mut HeadStart), QueryError> {
        if self.source.is_none() {
            self.source = Some(Source::open(&self.db, self.team.as_ref())?);
        }
        let source = self.source.as_mut().ok_or_else(|| {
            QueryError::Store(StoreError::Missing {
                path: self.db.clone(),
            })
        })?;
        Ok((source, &mut self.head))
    }

    pub fn source(&mut self) -> Result<&mut Source, QueryError> {
        Ok(self.parts()?.0)
    }

    /// The index, for what only the index holds (a session's entries and
    /// tree, images); with `--pg` such a request is refused.
    pub fn index(&mut self) -> Result<&Index, QueryError> {
        self.source()?.index().ok_or_else(|| {
            QueryError::Request(
                "serve --pg answers from the team store, which holds no session's entries; this page needs the index (serve without --pg)".into(),
            )
        })
    }

    /// Drops the connections after a failure: the database may have been
    /// rebuilt or re-sharded; the next request opens it afresh.
    pub fn reset(&mut self) {
        self.source = None;
        self.head = HeadStart::default();
    }
}

#[cfg(test)]
mod tests {
    use super::{Local, PathBuf, Searches};

    #[test]
    fn searches_leave_a_worker_for_the_pages() {
        let local = Local::new(PathBuf::from("/nonexistent"), None, Searches::new(3, None));
        let first = local.search_slot().expect("a place");
        let second = local.search_slot().expect("a second place");
        assert!(
            local.search_slot().is_none(),
            "the third worker stays for pages"
        );
        drop(first);
        let third = local
            .search_slot()
            .expect("a place given back is taken again");
        assert!(local.search_slot().is_none());
        drop((second, third));
        let alone = Local::new(PathBuf::from("/nonexistent"), None, Searches::new(1, None));
        assert!(alone.search_slot().is_some(), "one worker also searches");
    }
}
