//! Tables (Iceberg): each topic's table as an exact view of its archive, kept without a coordinator.
//!
//! Per partition the table records a chain position: the claim start right after the last file it
//! holds ([`state::TableState`]: in the table's properties, and for the partitions a commit moves in
//! its snapshot's summary, written in the same commit as the files). A committer adds, per partition, only the contiguous run of durable data
//! objects that starts exactly there, and moves the position in that commit ([`plan::plan`]); the catalog's
//! atomic swap of the table's metadata is the one point of order, and a commit that meets a newer
//! snapshot plans again from the positions it finds. So a file is in the table at most once, in chain
//! order, with no hole, whoever commits it — another instance, a zombie or a racing group.
//!
//! The decisions are pure ([`plan`], [`state`], [`cadence`], [`partition`], [`audit`], and Iceberg's
//! format in [`iceberg`]); the I/O around them is thin: the catalogs ([`catalog`]), reading a partition's
//! chain ([`chain`]), the commit itself ([`committer`], [`snapshot`]) and reading a table back
//! ([`inspect`]).

pub mod audit;
pub mod cadence;
pub mod catalog;
pub mod chain;
pub mod committer;
pub mod fit;
pub mod iceberg;
pub mod inspect;
pub mod partition;
pub mod plan;
pub mod recent;
pub mod snapshot;
pub mod state;

/// The table a topic's records go to: its name with every character other than an ASCII letter, digit
/// or `_` as `_` (Iceberg names are SQL identifiers; topic names may hold `.` and `-`).
pub fn table_name(topic: &str) -> String {
    topic.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_is_named_after_its_topic_in_sql_identifier_characters() {
        assert_eq!(table_name("orders"), "orders");
        assert_eq!(table_name("shop.orders-v2"), "shop_orders_v2");
        assert_eq!(table_name("a_b.C9"), "a_b_C9");
    }
}
