//! Fenced writes to a real PostgreSQL (feature `postgres`; `scripts/test` runs this file with
//! it, on a throwaway server the test kit starts): two holders of one lock, the first stalled
//! past its lease; its late transaction is refused by the fence check and rolled back, and the
//! table holds only the newer holder's write.

use crate::common;

use fencelock::Error;
use fencelock_testkit::PostgresServer;

async fn connect(pg: &PostgresServer) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&pg.conninfo(), tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to PostgreSQL: {e}"));
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("PostgreSQL connection: {e}");
        }
    });
    client
}

/// One holder's transaction: the fence check, then the protected write; committed only if the
/// check passed.
async fn write_balance(
    db: &mut tokio_postgres::Client,
    fence: u64,
    balance: i64,
) -> Result<(), Error> {
    let tx = db.transaction().await.unwrap_or_else(|e| panic!("{e}"));
    tx.execute(
        "UPDATE accounts SET balance = $1, written_with = $2 WHERE id = 42",
        &[&balance, &i64::try_from(fence).unwrap_or(i64::MAX)],
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    match fencelock::postgres::check_fence(&tx, "accounts/42", fence).await {
        Ok(()) => {
            tx.commit().await.unwrap_or_else(|e| panic!("{e}"));
            Ok(())
        }
        Err(e) => {
            tx.rollback().await.unwrap_or_else(|e| panic!("{e}"));
            Err(e)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_holders_late_transaction_is_rolled_back() {
    let pg = PostgresServer::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}"));
    let redis = common::server();
    let mut db_first = connect(&pg).await;
    let mut db_second = connect(&pg).await;
    fencelock::postgres::create_fences_table(&db_first)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db_first
        .batch_execute(
            "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL, written_with bigint);
             INSERT INTO accounts VALUES (42, 0, NULL);",
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    let locks = common::client(&redis.url());
    let (first, second) = common::stalled_then_replaced(&locks, &locks, "accounts/42").await;
    assert!(second.fence() > first.fence());
    write_balance(&mut db_second, second.fence(), 200)
        .await
        .unwrap_or_else(|e| panic!("the current holder's write: {e}"));

    // The stalled holder wakes up and writes: refused, rolled back.
    let err = write_balance(&mut db_first, first.fence(), 100)
        .await
        .unwrap_err();
    match &err {
        Error::Fenced {
            resource,
            fence,
            accepted,
        } => {
            assert_eq!(resource, "accounts/42");
            assert_eq!(*fence, first.fence());
            assert_eq!(*accepted, second.fence());
        }
        other => panic!("expected Error::Fenced, got {other:?}"),
    }
    let row = db_first
        .query_one(
            "SELECT balance, written_with FROM accounts WHERE id = 42",
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let balance: i64 = row.get(0);
    let written_with: i64 = row.get(1);
    assert_eq!(balance, 200, "the stale write was committed");
    assert_eq!(u64::try_from(written_with).ok(), Some(second.fence()));
    let second_fence = second.fence();
    assert!(second.release().await.unwrap_or_else(|e| panic!("{e}")));

    // The same holder may write again with its fence; a PostgreSQL error names the resource.
    write_balance(&mut db_second, second_fence, 300)
        .await
        .unwrap_or_else(|e| panic!("the same fence again: {e}"));
    let missing = db_first.batch_execute("DROP TABLE fences").await;
    missing.unwrap_or_else(|e| panic!("{e}"));
    let err = write_balance(&mut db_first, second_fence + 1, 400)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Sql { .. }), "{err:?}");
    assert!(err.to_string().contains("accounts/42"), "{err}");
}
