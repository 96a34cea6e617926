//! Rule set for nextcloud (being written).
