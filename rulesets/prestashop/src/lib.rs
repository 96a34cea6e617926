//! Rule set for prestashop (being written).
