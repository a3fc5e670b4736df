//! Fenced writes to PostgreSQL (feature `postgres`, on `tokio-postgres`): the fence check runs
//! in the **same transaction** as the protected write, so a holder whose lease ran out and was
//! replaced commits nothing.
//!
//! A `fences` table remembers the largest fence each resource has accepted:
//!
//! ```sql
//! CREATE TABLE IF NOT EXISTS fences (resource text PRIMARY KEY, fence bigint NOT NULL);
//! ```
//!
//! and, inside the transaction that writes,
//!
//! ```sql
//! INSERT INTO fences (resource, fence) VALUES ($1, $2)
//! ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence
//!   WHERE fences.fence <= EXCLUDED.fence
//! RETURNING fence;
//! ```
//!
//! No row back means a newer holder has written: roll back. [`check_fence`] runs exactly this
//! and returns [`Error::Fenced`] then. The row lock it takes also orders
//! concurrent writers of one resource until they commit.
//!
//! Tables that carry their own fence column can use the single-row form instead — zero rows
//! updated means a newer fence has written that row:
//!
//! ```sql
//! UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2;
//! ```
//!
//! ```no_run
//! # async fn example(lock: fencelock::Client, db: &mut tokio_postgres::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let guard = lock.lock("accounts/42").acquire().await?;
//! let tx = db.transaction().await?;
//! fencelock::postgres::check_fence(&tx, "accounts/42", guard.fence()).await?; // rolls back on Err
//! tx.execute("UPDATE accounts SET balance = 100 WHERE id = 42", &[]).await?;
//! tx.commit().await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```

use tokio_postgres::GenericClient;

use crate::error::{Error, Result};

/// The `fences` table (created if missing).
pub const CREATE_FENCES_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS fences (resource text PRIMARY KEY, fence bigint NOT NULL)";

/// The fence check: raises the resource's fence to `$2` and returns it, or returns no row when
/// a newer fence was accepted.
pub const CHECK_FENCE: &str = "INSERT INTO fences (resource, fence) VALUES ($1, $2) \
     ON CONFLICT (resource) DO UPDATE SET fence = EXCLUDED.fence \
     WHERE fences.fence <= EXCLUDED.fence RETURNING fence";

/// Creates the `fences` table if it does not exist.
///
/// # Errors
///
/// [`Error::Sql`] if PostgreSQL refuses.
pub async fn create_fences_table(client: &impl GenericClient) -> Result<()> {
    client
        .batch_execute(CREATE_FENCES_TABLE)
        .await
        .map_err(|source| Error::Sql {
            resource: String::new(),
            source,
        })
}

/// Checks and raises `resource`'s fence inside the caller's transaction. Run it before (or
/// after) the protected writes, in the same transaction, and roll back when it fails.
///
/// # Errors
///
/// - [`Error::Fenced`]: a newer fence was accepted; roll back.
/// - [`Error::InvalidArgument`]: a fence too large for a `bigint` (never a fencelock fence).
/// - [`Error::Sql`]: PostgreSQL refused (no `fences` table, a broken connection, ...).
pub async fn check_fence(tx: &impl GenericClient, resource: &str, fence: u64) -> Result<()> {
    let checked = check(tx, resource, fence).await;
    crate::observe::fenced_write(resource, &checked);
    checked
}

async fn check(tx: &impl GenericClient, resource: &str, fence: u64) -> Result<()> {
    let value = i64::try_from(fence)
        .map_err(|_| Error::invalid(resource, format!("fence {fence} does not fit a bigint")))?;
    let sql = |source| Error::Sql {
        resource: resource.to_owned(),
        source,
    };
    let rows = tx
        .query(CHECK_FENCE, &[&resource, &value])
        .await
        .map_err(sql)?;
    if !rows.is_empty() {
        return Ok(());
    }
    let accepted: i64 = tx
        .query_one("SELECT fence FROM fences WHERE resource = $1", &[&resource])
        .await
        .map_err(sql)?
        .try_get(0)
        .map_err(sql)?;
    Err(Error::Fenced {
        resource: resource.to_owned(),
        fence,
        accepted: u64::try_from(accepted).unwrap_or(0),
    })
}
