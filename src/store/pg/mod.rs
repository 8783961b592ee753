//! The team store: a PostgreSQL database that many indexes push into
//! (`piidx push`, `pg-migrations/`, docs/postgres.md). Its SQL lives here
//! (schema, push) and in `query::pg` (questions).
//!
//! The client is rust-postgres' blocking `postgres` crate: piidx is a
//! command-line program with one connection at a time, and COPY FROM STDIN
//! through it is a plain `Write`.

pub mod lexemes;
mod push;
pub mod words;

pub use push::{PushReport, push};

use postgres::{Client, NoTls};

/// Schema migrations of the team store, forward-only like SQLite's.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../pg-migrations/0001_init.sql"),
    include_str!("../../../pg-migrations/0002_lz4_texts.sql"),
    include_str!("../../../pg-migrations/0003_client_lexemes.sql"),
    include_str!("../../../pg-migrations/0004_word_blocks.sql"),
];

/// The schema version this build writes and reads.
pub const PG_SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// `pg_advisory_xact_lock` key of schema changes ("piix" + 0).
const SCHEMA_LOCK: i64 = 0x7069_6978_0000_0000;
/// First half of a push's `pg_advisory_lock` key; the second is its `src`.
pub(crate) const PUSH_LOCK: i32 = 0x7069_6978;

#[derive(Debug, thiserror::Error)]
pub enum PgError {
    #[error(
        "cannot connect to the team store {url} (check the URL, that the server runs and that the role may log in)"
    )]
    Connect {
        url: String,
        source: postgres::Error,
    },
    #[error(
        "the team store {url} has schema {found} but this piidx knows up to {known}; upgrade piidx"
    )]
    TooNew { url: String, found: i32, known: i32 },
    #[error(
        "the team store {url} has schema {found} but this piidx needs {known}; run `piidx push` to upgrade it"
    )]
    TooOld { url: String, found: i32, known: i32 },
    #[error("the team store {url}")]
    Postgres {
        url: String,
        source: postgres::Error,
    },
    #[error("sending rows to the team store {url}")]
    Copy { url: String, source: std::io::Error },
    #[error(transparent)]
    Lexemes(#[from] crate::store::tokenizer::TokenizerError),
    #[error(transparent)]
    Words(#[from] words::Malformed),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// A connection to the team store, with the URL to name it by (password
/// left out).
pub struct Pg {
    pub client: Client,
    pub url: String,
}

impl Pg {
    /// Connects; `url` is a `postgres://` URL or a `key=value` string.
    pub fn connect(url: &str) -> Result<Pg, PgError> {
        let shown = without_password(url);
        let client = Client::connect(url, NoTls).map_err(|source| PgError::Connect {
            url: shown.clone(),
            source,
        })?;
        Ok(Pg { client, url: shown })
    }

    pub(crate) fn err(&self) -> impl Fn(postgres::Error) -> PgError + '_ {
        |source| PgError::Postgres {
            url: self.url.clone(),
            source,
        }
    }

    /// `err` that does not borrow the connection.
    pub(crate) fn err_owned(&self) -> impl Fn(postgres::Error) -> PgError + use<> {
        let url = self.url.clone();
        move |source| PgError::Postgres {
            url: url.clone(),
            source,
        }
    }

    /// Brings the schema to `PG_SCHEMA_VERSION` (one transaction, under an
    /// advisory lock so that pushers starting together migrate once).
    pub fn migrate(&mut self) -> Result<(), PgError> {
        // Nearly always the schema is current: one read says so, without
        // the transaction and lock (round trips of every push).
        if self.schema_version() == Some(PG_SCHEMA_VERSION) {
            return Ok(());
        }
        let url = self.url.clone();
        let err = |source| PgError::Postgres {
            url: url.clone(),
            source,
        };
        let mut tx = self.client.transaction().map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
            .map_err(err)?;
        tx.batch_execute("CREATE TABLE IF NOT EXISTS piidx_schema(version integer NOT NULL)")
            .map_err(err)?;
        let found: Option<i32> = tx
            .query_opt("SELECT version FROM piidx_schema", &[])
            .map_err(err)?
            .map(|row| row.try_get(0))
            .transpose()
            .map_err(err)?;
        let found = found.unwrap_or(0);
        if found > PG_SCHEMA_VERSION {
            return Err(PgError::TooNew {
                url,
                found,
                known: PG_SCHEMA_VERSION,
            });
        }
        for sql in MIGRATIONS.iter().skip(found as usize) {
            tx.batch_execute(sql).map_err(err)?;
        }
        if found != PG_SCHEMA_VERSION {
            tx.execute("DELETE FROM piidx_schema", &[]).map_err(err)?;
            tx.execute(
                "INSERT INTO piidx_schema(version) VALUES ($1)",
                &[&PG_SCHEMA_VERSION],
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// The store's schema version; `None` when it has none yet (or it
    /// cannot be read).
    fn schema_version(&mut self) -> Option<i32> {
        self.client
            .query_opt(
                "SELECT version FROM piidx_schema WHERE to_regclass('piidx_schema') IS NOT NULL",
                &[],
            )
            .ok()
            .flatten()
            .and_then(|row| row.try_get(0).ok())
    }

    /// For questions: the schema must be the one this build knows.
    pub fn check_readable(&mut self) -> Result<(), PgError> {
        let found = self.schema_version().unwrap_or(0);
        if found == PG_SCHEMA_VERSION {
            return Ok(());
        }
        let (url, known) = (self.url.clone(), PG_SCHEMA_VERSION);
        Err(if found > known {
            PgError::TooNew { url, found, known }
        } else {
            PgError::TooOld { url, found, known }
        })
    }
}

/// The URL with any password replaced by `***` (for messages and for the
/// index's record of where it pushed).
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, host) = match rest.rsplit_once('@') {
        Some(split) => split,
        None => return url.to_owned(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::without_password;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            without_password("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(without_password("postgres://h/db"), "postgres://h/db");
        assert_eq!(without_password("host=/tmp dbname=x"), "host=/tmp dbname=x");
    }
}
