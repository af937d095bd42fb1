//! Who gets one of a server's connections: a fair share per client address, and a reserve for addresses that hold
//! none (the kubelet's probes).
//!
//! The probes and metrics ports are reachable from every pod. The kubelet opens a fresh connection for each probe
//! (it disables keep-alive) from an address of its node, so at any moment it holds at most a few; Prometheus holds
//! one or two per replica. A hostile client that wants to keep them out has to hold every connection, from as many
//! addresses as it can. So when the server is full, a newcomer takes the oldest connection of the address that holds
//! the most, as long as that address holds at least two more than the newcomer: what one address (or a handful)
//! holds is never the whole server. Only when every address holds about as much as the newcomer (64 hostile
//! addresses with one connection each) is there no one to take from; then an address that holds none gets one of a
//! few reserved connections, which serve one request and live seconds (see [`super::Limits::reserved`]).
//!
//! Pure bookkeeping: the caller closes the evicted connection (its `K`, a kill switch) and hands back the
//! [`Ticket`] when a connection ends.

use std::collections::HashMap;
use std::net::IpAddr;

/// How a server shares its connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    /// Connections open at once in the general budget.
    pub connections: usize,
    /// Connections kept for addresses that hold none, when the general budget is full and nobody holds enough to
    /// give one up.
    pub reserve: usize,
    /// Reserved connections one address may hold at once (the kubelet's liveness and readiness probes can coincide).
    pub reserve_per_address: usize,
}

/// What became of a new connection.
#[derive(Debug)]
pub enum Admitted<K> {
    /// A place in the general budget.
    General(Ticket),
    /// A place in the general budget, taken from the connection whose kill switch this is: close it now.
    Evicting(Ticket, K),
    /// One of the reserved places: one request, a short life.
    Reserve(Ticket),
    /// No place: close the connection at once.
    Refused,
}

/// One admitted connection, to hand back to [`Admission::release`] when it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket {
    id: u64,
    address: IpAddr,
    reserved: bool,
}

impl Ticket {
    /// Whether the connection holds a reserved place.
    pub fn reserved(&self) -> bool {
        self.reserved
    }
}

/// The open connections of one server, by client address.
#[derive(Debug)]
pub struct Admission<K> {
    shares: Shares,
    addresses: HashMap<IpAddr, Held<K>>,
    general: usize,
    reserved: usize,
    next_id: u64,
}

/// What one address holds: its general connections, oldest first, and how many reserved ones.
#[derive(Debug)]
struct Held<K> {
    general: Vec<(u64, K)>,
    reserved: usize,
}

impl<K> Held<K> {
    fn count(&self) -> usize {
        self.general.len() + self.reserved
    }
}

impl<K> Admission<K> {
    pub fn new(shares: Shares) -> Admission<K> {
        Admission {
            shares,
            addresses: HashMap::new(),
            general: 0,
            reserved: 0,
            next_id: 0,
        }
    }

    /// A place for a new connection from `address`, whose kill switch is `kill`.
    pub fn admit(&mut self, address: IpAddr, kill: K) -> Admitted<K> {
        // A client on an IPv4 address reaches a dual-stack listener as ::ffff:a.b.c.d; it is the same client.
        let address = address.to_canonical();
        let holds = self.addresses.get(&address).map_or(0, Held::count);
        let id = self.next_id;
        if self.general < self.shares.connections {
            self.general += 1;
            self.hold(address, id, kill);
            return Admitted::General(self.ticket(id, address, false));
        }
        if let Some(victim) = self.busiest().filter(|(_, held)| *held >= holds + 2).map(|(at, _)| at) {
            let evicted = self.evict_oldest(victim);
            if let Some(evicted) = evicted {
                self.hold(address, id, kill);
                return Admitted::Evicting(self.ticket(id, address, false), evicted);
            }
        }
        let general_here = self.addresses.get(&address).map_or(0, |held| held.general.len());
        let reserved_here = self.addresses.get(&address).map_or(0, |held| held.reserved);
        if general_here == 0 && reserved_here < self.shares.reserve_per_address && self.reserved < self.shares.reserve {
            self.reserved += 1;
            self.addresses
                .entry(address)
                .or_insert_with(|| Held {
                    general: Vec::new(),
                    reserved: 0,
                })
                .reserved += 1;
            return Admitted::Reserve(self.ticket(id, address, true));
        }
        Admitted::Refused
    }

    /// The place of a connection that ended goes back (nothing happens for one that was evicted: its place went to
    /// the connection that took it).
    pub fn release(&mut self, ticket: &Ticket) {
        let Some(held) = self.addresses.get_mut(&ticket.address) else {
            return;
        };
        if ticket.reserved {
            if held.reserved > 0 {
                held.reserved -= 1;
                self.reserved -= 1;
            }
        } else if let Some(at) = held.general.iter().position(|(id, _)| *id == ticket.id) {
            held.general.remove(at);
            self.general -= 1;
        }
        if held.count() == 0 {
            self.addresses.remove(&ticket.address);
        }
    }

    /// Open connections: (general, reserved).
    pub fn open(&self) -> (usize, usize) {
        (self.general, self.reserved)
    }

    /// Addresses holding at least one connection.
    pub fn addresses(&self) -> usize {
        self.addresses.len()
    }

    fn ticket(&mut self, id: u64, address: IpAddr, reserved: bool) -> Ticket {
        self.next_id += 1;
        Ticket { id, address, reserved }
    }

    fn hold(&mut self, address: IpAddr, id: u64, kill: K) {
        self.addresses
            .entry(address)
            .or_insert_with(|| Held {
                general: Vec::new(),
                reserved: 0,
            })
            .general
            .push((id, kill));
    }

    /// The address holding the most general connections (of equals, the one whose oldest is oldest) and how many
    /// connections it holds in all.
    fn busiest(&self) -> Option<(IpAddr, usize)> {
        self.addresses
            .iter()
            .filter_map(|(address, held)| held.general.first().map(|(oldest, _)| (address, held, *oldest)))
            .max_by(|(_, a, a_oldest), (_, b, b_oldest)| {
                a.general
                    .len()
                    .cmp(&b.general.len())
                    .then_with(|| b_oldest.cmp(a_oldest))
            })
            .map(|(address, held, _)| (*address, held.count()))
    }

    fn evict_oldest(&mut self, address: IpAddr) -> Option<K> {
        let held = self.addresses.get_mut(&address)?;
        if held.general.is_empty() {
            return None;
        }
        let (_, kill) = held.general.remove(0);
        if held.count() == 0 {
            self.addresses.remove(&address);
        }
        Some(kill)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn shares() -> Shares {
        Shares {
            connections: 8,
            reserve: 4,
            reserve_per_address: 2,
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    fn general(admitted: Admitted<u32>) -> Ticket {
        match admitted {
            Admitted::General(ticket) => ticket,
            other => panic!("expected a general place, got {other:?}"),
        }
    }

    #[test]
    fn connections_get_general_places_until_the_budget_is_full_and_a_release_frees_one() {
        let mut admission = Admission::new(Shares { reserve: 0, ..shares() });
        let tickets: Vec<Ticket> = (0..8).map(|i| general(admission.admit(ip(i), u32::from(i)))).collect();
        assert_eq!(admission.open(), (8, 0));
        // Every address holds one: nobody to take from, no reserve.
        assert!(matches!(admission.admit(ip(100), 100), Admitted::Refused));
        admission.release(&tickets[3]);
        assert_eq!(admission.open(), (7, 0));
        general(admission.admit(ip(100), 100));
        assert_eq!(admission.addresses(), 8);
    }

    #[test]
    fn a_newcomer_takes_the_oldest_connection_of_the_address_holding_the_most() {
        let mut admission = Admission::new(shares());
        let mut hostile = Vec::new();
        for kill in 0..6 {
            hostile.push(general(admission.admit(ip(1), kill)));
        }
        for kill in 6..8 {
            general(admission.admit(ip(2), kill));
        }
        // ip(1) holds 6, the newcomer none: ip(1)'s oldest goes.
        match admission.admit(ip(3), 100) {
            Admitted::Evicting(ticket, evicted) => {
                assert_eq!(evicted, 0);
                assert!(!ticket.reserved());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(admission.open(), (8, 0));
        // The evicted connection's own release, when it has closed, changes nothing.
        admission.release(&hostile[0]);
        assert_eq!(admission.open(), (8, 0));
        // ip(1) itself, at 5, cannot take from anyone: it is the busiest.
        assert!(matches!(admission.admit(ip(1), 101), Admitted::Refused));
        // ip(2) at 2 takes from ip(1) at 5.
        assert!(matches!(admission.admit(ip(2), 102), Admitted::Evicting(_, 1)));
    }

    #[test]
    fn nobody_gives_up_a_connection_to_an_address_holding_almost_as_many() {
        let mut admission = Admission::new(Shares { reserve: 0, ..shares() });
        for kill in 0..4 {
            general(admission.admit(ip(1), kill));
            general(admission.admit(ip(2), kill + 10));
        }
        // ip(3) with none takes from a busiest address (4 ≥ 0 + 2) — ip(1), whose oldest is older.
        assert!(matches!(admission.admit(ip(3), 20), Admitted::Evicting(_, 0)));
        assert!(matches!(admission.admit(ip(3), 21), Admitted::Evicting(_, 10)));
        // ip(3) now holds 2 and the others 3: one less is not enough.
        assert!(matches!(admission.admit(ip(3), 22), Admitted::Refused));
    }

    #[test]
    fn the_reserve_is_for_addresses_that_hold_nothing_two_each() {
        let mut admission = Admission::new(shares());
        for i in 0..8 {
            general(admission.admit(ip(i), u32::from(i)));
        }
        // An address holding a general connection gets no reserved one.
        assert!(matches!(admission.admit(ip(0), 50), Admitted::Refused));
        let kubelet = ip(200);
        let first = match admission.admit(kubelet, 60) {
            Admitted::Reserve(ticket) => ticket,
            other => panic!("{other:?}"),
        };
        assert!(first.reserved());
        assert!(matches!(admission.admit(kubelet, 61), Admitted::Reserve(_)));
        assert!(
            matches!(admission.admit(kubelet, 62), Admitted::Refused),
            "two per address"
        );
        assert!(matches!(admission.admit(ip(201), 63), Admitted::Reserve(_)));
        assert!(matches!(admission.admit(ip(202), 64), Admitted::Reserve(_)));
        assert!(
            matches!(admission.admit(ip(203), 65), Admitted::Refused),
            "the reserve is full"
        );
        assert_eq!(admission.open(), (8, 4));
        admission.release(&first);
        assert_eq!(admission.open(), (8, 3));
        assert!(matches!(admission.admit(ip(203), 66), Admitted::Reserve(_)));
    }

    #[test]
    fn an_ipv4_client_on_a_dual_stack_listener_is_one_address() {
        let mut admission = Admission::new(Shares {
            connections: 2,
            reserve: 1,
            reserve_per_address: 1,
        });
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        general(admission.admit(mapped, 0));
        general(admission.admit(ip(1), 1));
        // The same client through either form holds a general place: no reserve for it.
        assert!(matches!(admission.admit(ip(1), 2), Admitted::Refused));
        assert_eq!(admission.addresses(), 1);
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert!(matches!(admission.admit(v6, 3), Admitted::Evicting(_, 0)));
    }

    /// The case the servers are built for: hostile addresses trickling bytes on every connection they can get, the
    /// kubelet arriving last.
    #[test]
    fn the_kubelet_gets_in_however_a_few_addresses_fill_the_server() {
        let mut admission = Admission::new(Shares {
            connections: 64,
            reserve: 8,
            reserve_per_address: 2,
        });
        let mut kills = 0u32;
        // 20 addresses, each trying 100 connections, in turn.
        for _ in 0..100 {
            for address in 1..=20 {
                kills += 1;
                let _ = admission.admit(ip(address), kills);
            }
        }
        assert_eq!(admission.open().0, 64);
        let kubelet = ip(250);
        assert!(matches!(admission.admit(kubelet, 0), Admitted::Evicting(..)));
        assert!(matches!(admission.admit(kubelet, 0), Admitted::Evicting(..)));

        // 64 addresses with one connection each leave nobody to take from: the reserve answers.
        let mut admission = Admission::new(Shares {
            connections: 64,
            reserve: 8,
            reserve_per_address: 2,
        });
        for address in 0..64u8 {
            general(admission.admit(IpAddr::V4(Ipv4Addr::new(10, 1, 0, address)), 0));
        }
        assert!(matches!(admission.admit(kubelet, 0), Admitted::Reserve(_)));
    }
}
