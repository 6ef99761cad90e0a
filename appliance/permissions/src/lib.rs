//! The permission set of a usage key, written once.
//!
//! Three flags and four per-group arrays; in each array `0` means "all groups". The flags
//! are the same everywhere, but each layer holds the arrays its own way, so the type is
//! generic over the array, `G`:
//!
//! | layer | `G` | name there |
//! |---|---|---|
//! | the `/core/v1` wire fields (crate `appliance-api`) | `Vec<WireU64>` | `WirePermissions` |
//! | the authorization model (`appliance::authz`) | `GroupSet`, sorted and deduplicated | `Permissions` |
//! | the chain outbox and indexer (`chain_contracts::ops`) | `Vec<u64>` | `MirrorPermissions` |
//! | the contract's ABI struct (`IAccountConfig::UsageKeyPermissions`) | `Vec<U256>` | converted in `chain_contracts::ops` |
//!
//! Going from one layer to another is one [`UsageKeyPermissions::map_sets`] (or
//! [`UsageKeyPermissions::try_map_sets`], which names the field it is converting, for
//! per-field errors); nothing else copies the seven fields one by one.
//!
//! The serde form is the fields by name, in declaration order, none optional. It is
//! persisted (the appliance's chain outbox stores `MirrorPermissions` in it): renaming a
//! field breaks existing databases.
//!
//! May depend on: no workspace crate, serde only; never on `appliance-api` or
//! `chain-contracts`, which both depend on it so that neither needs the other.

use serde::{Deserialize, Serialize};

/// The permissions of a usage key, as set by its account key. `G` is a per-group array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageKeyPermissions<G> {
    pub can_create_groups: bool,
    pub can_delete_groups: bool,
    pub can_create_pkps: bool,
    /// Groups where the key may add and remove actions.
    pub manage_ipfs_ids_in_groups: G,
    /// Groups where the key may add wallets.
    pub add_pkp_to_groups: G,
    /// Groups where the key may remove wallets.
    pub remove_pkp_from_groups: G,
    /// Groups where the key may execute actions.
    pub execute_in_groups: G,
}

impl<G> UsageKeyPermissions<G> {
    /// Converts each of the four arrays with `f`, which is also given the field's name (as
    /// serde spells it). The arrays are visited in declaration order and the first error
    /// is returned; the flags are kept.
    pub fn try_map_sets<H, E>(
        self,
        mut f: impl FnMut(&'static str, G) -> Result<H, E>,
    ) -> Result<UsageKeyPermissions<H>, E> {
        let Self {
            can_create_groups,
            can_delete_groups,
            can_create_pkps,
            manage_ipfs_ids_in_groups,
            add_pkp_to_groups,
            remove_pkp_from_groups,
            execute_in_groups,
        } = self;
        Ok(UsageKeyPermissions {
            can_create_groups,
            can_delete_groups,
            can_create_pkps,
            manage_ipfs_ids_in_groups: f("manage_ipfs_ids_in_groups", manage_ipfs_ids_in_groups)?,
            add_pkp_to_groups: f("add_pkp_to_groups", add_pkp_to_groups)?,
            remove_pkp_from_groups: f("remove_pkp_from_groups", remove_pkp_from_groups)?,
            execute_in_groups: f("execute_in_groups", execute_in_groups)?,
        })
    }

    /// Converts each of the four arrays with `f`; the flags are kept.
    pub fn map_sets<H>(self, mut f: impl FnMut(G) -> H) -> UsageKeyPermissions<H> {
        let Ok(mapped) = self.try_map_sets(|_, set| Ok::<H, std::convert::Infallible>(f(set)));
        mapped
    }

    /// The same permissions with the arrays borrowed, to convert without consuming.
    pub fn by_ref(&self) -> UsageKeyPermissions<&G> {
        UsageKeyPermissions {
            can_create_groups: self.can_create_groups,
            can_delete_groups: self.can_delete_groups,
            can_create_pkps: self.can_create_pkps,
            manage_ipfs_ids_in_groups: &self.manage_ipfs_ids_in_groups,
            add_pkp_to_groups: &self.add_pkp_to_groups,
            remove_pkp_from_groups: &self.remove_pkp_from_groups,
            execute_in_groups: &self.execute_in_groups,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::convert::Infallible;

    use super::*;

    /// Four different arrays (1, 2, 3, 4 in declaration order) and flags that differ.
    fn distinct() -> UsageKeyPermissions<u64> {
        UsageKeyPermissions {
            can_create_groups: true,
            can_delete_groups: false,
            can_create_pkps: true,
            manage_ipfs_ids_in_groups: 1,
            add_pkp_to_groups: 2,
            remove_pkp_from_groups: 3,
            execute_in_groups: 4,
        }
    }

    /// The name `try_map_sets` passes with each array is that array's own serde field
    /// name: mapping every array to "name=value" and serializing puts each field's own
    /// name and value under it. Swapping two arrays, or two names, fails here.
    #[test]
    fn each_array_is_converted_under_its_own_name() {
        let original = serde_json::to_value(distinct()).unwrap();
        let named = distinct()
            .try_map_sets(|name, id| Ok::<_, Infallible>(format!("{name}={id}")))
            .unwrap();
        let named = serde_json::to_value(named).unwrap();
        let mut arrays = 0;
        for (field, value) in named.as_object().unwrap() {
            match value {
                serde_json::Value::String(s) => {
                    assert_eq!(s, &format!("{field}={}", original[field]));
                    arrays += 1;
                }
                flag => assert_eq!(flag, &original[field], "{field}"),
            }
        }
        assert_eq!(arrays, 4);
    }

    #[test]
    fn arrays_are_visited_in_declaration_order_and_the_first_error_wins() {
        let mut seen = Vec::new();
        let err = distinct()
            .try_map_sets(|name, id| {
                seen.push(name);
                if id >= 3 { Err(name) } else { Ok(id) }
            })
            .unwrap_err();
        assert_eq!(err, "remove_pkp_from_groups");
        assert_eq!(
            seen,
            [
                "manage_ipfs_ids_in_groups",
                "add_pkp_to_groups",
                "remove_pkp_from_groups"
            ]
        );
    }

    #[test]
    fn map_sets_keeps_each_array_in_its_field() {
        let tenfold = distinct().map_sets(|id| id * 10);
        assert_eq!(
            tenfold,
            UsageKeyPermissions {
                can_create_groups: true,
                can_delete_groups: false,
                can_create_pkps: true,
                manage_ipfs_ids_in_groups: 10,
                add_pkp_to_groups: 20,
                remove_pkp_from_groups: 30,
                execute_in_groups: 40,
            }
        );
        let p = distinct();
        assert_eq!(p.by_ref().map_sets(|&id| id), p);
    }

    /// The serde form, which the chain outbox persists: the field names, in order.
    #[test]
    fn the_serde_form_is_the_field_names_in_order() {
        let p = distinct().map_sets(|id| vec![id]);
        let json = r#"{"can_create_groups":true,"can_delete_groups":false,"can_create_pkps":true,"manage_ipfs_ids_in_groups":[1],"add_pkp_to_groups":[2],"remove_pkp_from_groups":[3],"execute_in_groups":[4]}"#;
        assert_eq!(serde_json::to_string(&p).unwrap(), json);
        assert_eq!(
            serde_json::from_str::<UsageKeyPermissions<Vec<u64>>>(json).unwrap(),
            p
        );
    }
}
