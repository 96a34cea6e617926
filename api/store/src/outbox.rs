//! How one claim of due webhooks shares a gateway's free slots among partners, the
//! rule both backends follow (the Redis store's `claim_deliveries.lua` mirrors
//! [`ClaimShares::allocate`]).

use botgate_model::PartnerName;
use std::collections::HashMap;

/// The partners' shares of one claim: a partner runs at most `per_partner` attempts at
/// once on the claiming gateway, counting the ones it `held` there already. The free
/// slots go one at a time to the due partner holding fewest (what it held plus what
/// this claim gave it), and among equals to the one whose oldest delivery is due
/// longest: a partner with a backlog, or a receiver that never answers, waits behind
/// every other partner with something due.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimShares {
    pub per_partner: usize,
    pub held: HashMap<PartnerName, usize>,
}

impl ClaimShares {
    /// No share: any number of a partner's due deliveries may be claimed (the partners
    /// still take turns).
    pub fn unbounded() -> ClaimShares {
        ClaimShares {
            per_partner: usize::MAX,
            held: HashMap::new(),
        }
    }

    /// The most partners a claim of `limit` needs to look at, in order of their oldest
    /// due delivery: past these, `limit` partners with room were already seen.
    pub fn candidates(&self, limit: usize) -> usize {
        limit.saturating_add(self.held.len())
    }

    /// The room a claim has for `partner`, which has `due` deliveries due.
    pub fn room(&self, partner: &PartnerName, due: usize) -> usize {
        let held = self.held.get(partner).copied().unwrap_or(0);
        self.per_partner.saturating_sub(held).min(due)
    }

    /// How many deliveries each of the `due` partners gets of `limit`: `due` holds
    /// each partner and the deliveries it has due, in order of its oldest due delivery.
    pub fn allocate(&self, due: &[(PartnerName, usize)], limit: usize) -> Vec<usize> {
        let rooms: Vec<usize> = due
            .iter()
            .map(|(partner, count)| self.room(partner, *count))
            .collect();
        let mut holding: Vec<usize> = due
            .iter()
            .map(|(partner, _)| self.held.get(partner).copied().unwrap_or(0))
            .collect();
        let mut taken = vec![0; due.len()];
        for _ in 0..limit {
            let next = (0..due.len())
                .filter(|&i| taken[i] < rooms[i])
                .min_by_key(|&i| holding[i]);
            let Some(i) = next else { break };
            taken[i] += 1;
            holding[i] += 1;
        }
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partner(name: &str) -> PartnerName {
        PartnerName::parse(name).unwrap()
    }

    #[test]
    fn slots_go_to_the_partners_holding_fewest_then_to_the_longest_due() {
        let shares = ClaimShares {
            per_partner: 8,
            held: HashMap::from([(partner("stalled"), 8), (partner("busy"), 3)]),
        };
        let due = [
            (partner("stalled"), 1000),
            (partner("busy"), 500),
            (partner("quiet"), 1),
            (partner("other"), 10),
        ];
        // `stalled` is at its share; `quiet` has one; `other` and `busy` even out.
        assert_eq!(shares.allocate(&due, 4), [0, 0, 1, 3]);
        assert_eq!(shares.allocate(&due, 8), [0, 2, 1, 5]);
        assert_eq!(
            shares.allocate(&due, 100),
            [0, 5, 1, 8],
            "each to its share"
        );
        assert_eq!(shares.allocate(&due, 1), [0, 0, 1, 0]);
        assert_eq!(shares.allocate(&[], 10), Vec::<usize>::new());
        assert_eq!(shares.candidates(32), 34);
        let all = ClaimShares::unbounded();
        assert_eq!(all.allocate(&due[..2], 6), [3, 3]);
        assert_eq!(all.room(&partner("stalled"), 1000), 1000);
    }
}
