//! Statements run through the connection's statement cache: the commit
//! path sends the same few statements on every commit, each prepared once
//! per connection instead of parsed and planned again on every call (an
//! extra round trip per statement, much of it under the group lock).

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

/// Parameters of a statement.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// The rows of `sql`, prepared once per connection.
pub(crate) async fn query<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<Row>, Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query(&statement, params).await
}

/// The one row or none of `sql`, prepared once per connection.
pub(crate) async fn query_opt<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<Row>, Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query_opt(&statement, params).await
}

/// The one row of `sql`, prepared once per connection.
pub(crate) async fn query_one<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<Row, Error> {
    let statement = c.prepare_cached(sql).await?;
    c.query_one(&statement, params).await
}

/// The rows `sql` changed, prepared once per connection.
pub(crate) async fn execute<C: GenericClient>(
    c: &C,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, Error> {
    let statement = c.prepare_cached(sql).await?;
    c.execute(&statement, params).await
}
