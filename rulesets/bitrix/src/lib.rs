//! Rule set for bitrix (being written).
