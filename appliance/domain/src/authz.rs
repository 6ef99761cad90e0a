//! The permission model of the spec, as pure functions.
//!
//! An account key may do everything on its account. A usage key may do only what its
//! flags and per-group arrays allow; in each of the four arrays `0` means "all groups"
//! (`docs/compatibility.md`: a wildcard in all four arrays, unlike the reference). Whether a group,
//! wallet or action *exists* is decided later, by the store: authorization comes first,
//! so a key without a permission learns nothing about ids (403 before 404).
//! Executions are governed here too: [`execution_grant`] turns `ExecuteUnrestricted` and
//! `ExecuteInGroup` into what an action may run and, through its groups, which wallets.

use std::fmt;

use usage_key_permissions::UsageKeyPermissions;

/// A group's id: unique across the whole service, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupId(pub u64);

impl fmt::Display for GroupId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The wildcard in a per-group permission array.
pub const ALL_GROUPS: u64 = 0;

/// A per-group permission array, kept sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupSet(Vec<u64>);

impl GroupSet {
    pub fn new(mut ids: Vec<u64>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        Self(ids)
    }

    /// True if the set grants `group` (listed, or the wildcard `0` is present).
    pub fn covers(&self, group: GroupId) -> bool {
        self.is_wildcard() || self.0.binary_search(&group.0).is_ok()
    }

    pub fn is_wildcard(&self) -> bool {
        self.0.first() == Some(&ALL_GROUPS)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn ids(&self) -> &[u64] {
        &self.0
    }
}

/// The permissions of a usage key, as set by the account key: the one permission type
/// (crate `usage-key-permissions`) with its arrays as [`GroupSet`]s.
pub type Permissions = UsageKeyPermissions<GroupSet>;

/// What a request authenticated as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// The account's master key: everything on the account.
    AccountKey,
    /// A usage key with its permissions.
    UsageKey(Permissions),
}

/// Something a request wants to do. Group-scoped operations name the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Create, list, update or remove usage keys, and other account administration.
    ManageAccount,
    /// Read the account's groups, wallets and actions.
    ReadAccount,
    CreateGroup,
    /// Remove any group of the account (the spec's flag is not per group).
    DeleteGroup,
    /// Replace a group's name, description and permitted sets. That can add and remove
    /// both wallets and actions, so it needs all three per-group grants on that group.
    UpdateGroup(GroupId),
    CreateWallet,
    /// Register an action or change its metadata: any action-management grant.
    RegisterAction,
    /// Delete an action everywhere (it leaves every group): the action wildcard.
    DeleteAction,
    ManageActionsInGroup(GroupId),
    AddPkpToGroup(GroupId),
    RemovePkpFromGroup(GroupId),
    ExecuteInGroup(GroupId),
    /// Run any code with any wallet of the account.
    ExecuteUnrestricted,
}

/// A refusal, with the sentence the client sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denied(String);

impl Denied {
    fn because(what: &str) -> Self {
        Self(format!("this usage key is not permitted to {what}"))
    }

    /// No group of the [`ExecutionGrant`] permits the action `cid`. Names the rule, not
    /// the groups, so nothing about ids leaks.
    pub fn action_not_permitted(cid: &str) -> Self {
        Self(format!(
            "this usage key may not run {cid}: no group in its execute_in_groups permits this action"
        ))
    }
}

/// Decides whether `credential` may perform `operation`.
pub fn authorize(credential: &Credential, operation: Operation) -> Result<(), Denied> {
    let perms = match credential {
        Credential::AccountKey => return Ok(()),
        Credential::UsageKey(perms) => perms,
    };
    let allowed = match operation {
        Operation::ManageAccount => {
            return Err(Denied(
                "only the account key may manage usage keys and administer the account".into(),
            ));
        }
        Operation::ReadAccount => true,
        Operation::CreateGroup => perms.can_create_groups,
        Operation::DeleteGroup => perms.can_delete_groups,
        Operation::UpdateGroup(g) => {
            perms.manage_ipfs_ids_in_groups.covers(g)
                && perms.add_pkp_to_groups.covers(g)
                && perms.remove_pkp_from_groups.covers(g)
        }
        Operation::CreateWallet => perms.can_create_pkps,
        Operation::RegisterAction => !perms.manage_ipfs_ids_in_groups.is_empty(),
        Operation::DeleteAction => perms.manage_ipfs_ids_in_groups.is_wildcard(),
        Operation::ManageActionsInGroup(g) => perms.manage_ipfs_ids_in_groups.covers(g),
        Operation::AddPkpToGroup(g) => perms.add_pkp_to_groups.covers(g),
        Operation::RemovePkpFromGroup(g) => perms.remove_pkp_from_groups.covers(g),
        Operation::ExecuteInGroup(g) => perms.execute_in_groups.covers(g),
        Operation::ExecuteUnrestricted => perms.execute_in_groups.is_wildcard(),
    };
    if allowed {
        Ok(())
    } else {
        Err(Denied::because(describe(operation).as_str()))
    }
}

/// What a caller may run, and so with which wallets: the scope rule of an execution,
/// in terms of [`Operation::ExecuteUnrestricted`] and [`Operation::ExecuteInGroup`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecutionGrant {
    /// Any code, with every wallet of the account.
    Unrestricted,
    /// Only code that one of these groups permits, with the wallets of the groups that
    /// permit it (the store knows which do). Empty: nothing may run.
    InGroups(Vec<GroupId>),
}

/// The execution grant of `credential`.
pub fn execution_grant(credential: &Credential) -> ExecutionGrant {
    if authorize(credential, Operation::ExecuteUnrestricted).is_ok() {
        return ExecutionGrant::Unrestricted;
    }
    let listed = match credential {
        Credential::UsageKey(perms) => perms.execute_in_groups.ids(),
        Credential::AccountKey => &[],
    };
    ExecutionGrant::InGroups(
        listed
            .iter()
            .map(|&id| GroupId(id))
            .filter(|&group| authorize(credential, Operation::ExecuteInGroup(group)).is_ok())
            .collect(),
    )
}

fn describe(operation: Operation) -> String {
    match operation {
        Operation::ManageAccount => "administer the account".into(),
        Operation::ReadAccount => "read the account".into(),
        Operation::CreateGroup => "create groups (needs can_create_groups)".into(),
        Operation::DeleteGroup => "delete groups (needs can_delete_groups)".into(),
        Operation::UpdateGroup(g) => format!(
            "update group {g} (needs manage_ipfs_ids_in_groups, add_pkp_to_groups and remove_pkp_from_groups covering it)"
        ),
        Operation::CreateWallet => "create wallets (needs can_create_pkps)".into(),
        Operation::RegisterAction => {
            "register or edit actions (needs manage_ipfs_ids_in_groups)".into()
        }
        Operation::DeleteAction => {
            "delete actions from every group (needs manage_ipfs_ids_in_groups = [0])".into()
        }
        Operation::ManageActionsInGroup(g) => {
            format!("manage actions in group {g} (needs manage_ipfs_ids_in_groups)")
        }
        Operation::AddPkpToGroup(g) => {
            format!("add wallets to group {g} (needs add_pkp_to_groups)")
        }
        Operation::RemovePkpFromGroup(g) => {
            format!("remove wallets from group {g} (needs remove_pkp_from_groups)")
        }
        Operation::ExecuteInGroup(g) => format!("execute in group {g} (needs execute_in_groups)"),
        Operation::ExecuteUnrestricted => {
            "execute outside a group (needs execute_in_groups = [0])".into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G1: GroupId = GroupId(1);
    const G2: GroupId = GroupId(2);

    /// Every operation, with each group-scoped one on group 1 and on group 2.
    fn all_operations() -> Vec<Operation> {
        let mut ops = vec![
            Operation::ManageAccount,
            Operation::ReadAccount,
            Operation::CreateGroup,
            Operation::DeleteGroup,
            Operation::CreateWallet,
            Operation::RegisterAction,
            Operation::DeleteAction,
            Operation::ExecuteUnrestricted,
        ];
        for g in [G1, G2] {
            ops.extend([
                Operation::UpdateGroup(g),
                Operation::ManageActionsInGroup(g),
                Operation::AddPkpToGroup(g),
                Operation::RemovePkpFromGroup(g),
                Operation::ExecuteInGroup(g),
            ]);
        }
        ops
    }

    fn usage(perms: Permissions) -> Credential {
        Credential::UsageKey(perms)
    }

    /// The operations a key allows, as a sorted list of debug strings.
    fn allowed(credential: &Credential) -> Vec<String> {
        let mut out: Vec<String> = all_operations()
            .into_iter()
            .filter(|op| authorize(credential, *op).is_ok())
            .map(|op| format!("{op:?}"))
            .collect();
        out.sort();
        out
    }

    fn names(ops: &[Operation]) -> Vec<String> {
        let mut out: Vec<String> = ops.iter().map(|op| format!("{op:?}")).collect();
        out.sort();
        out
    }

    #[test]
    fn account_key_may_do_everything() {
        for op in all_operations() {
            assert!(authorize(&Credential::AccountKey, op).is_ok(), "{op:?}");
        }
    }

    #[test]
    fn empty_usage_key_may_only_read() {
        assert_eq!(
            allowed(&usage(Permissions::default())),
            names(&[Operation::ReadAccount])
        );
    }

    #[test]
    fn usage_keys_never_administer_the_account() {
        let everything = Permissions {
            can_create_groups: true,
            can_delete_groups: true,
            can_create_pkps: true,
            manage_ipfs_ids_in_groups: GroupSet::new(vec![0]),
            add_pkp_to_groups: GroupSet::new(vec![0]),
            remove_pkp_from_groups: GroupSet::new(vec![0]),
            execute_in_groups: GroupSet::new(vec![0]),
        };
        let key = usage(everything);
        let err = authorize(&key, Operation::ManageAccount).unwrap_err();
        assert!(err.to_string().contains("only the account key"));
        // ...and everything else is allowed to such a key.
        let mut expected = all_operations();
        expected.retain(|op| *op != Operation::ManageAccount);
        assert_eq!(allowed(&key), names(&expected));
    }

    #[test]
    fn each_flag_grants_exactly_its_operation() {
        let cases = [
            (
                Permissions {
                    can_create_groups: true,
                    ..Default::default()
                },
                Operation::CreateGroup,
            ),
            (
                Permissions {
                    can_delete_groups: true,
                    ..Default::default()
                },
                Operation::DeleteGroup,
            ),
            (
                Permissions {
                    can_create_pkps: true,
                    ..Default::default()
                },
                Operation::CreateWallet,
            ),
        ];
        for (perms, op) in cases {
            assert_eq!(
                allowed(&usage(perms)),
                names(&[Operation::ReadAccount, op]),
                "{op:?}"
            );
        }
    }

    /// One array listing group 1: exactly the operations on group 1 (plus what a
    /// non-empty action grant implies), nothing on group 2.
    #[test]
    fn each_array_is_scoped_to_its_groups() {
        let one = || GroupSet::new(vec![1]);
        let cases: Vec<(Permissions, Vec<Operation>)> = vec![
            (
                Permissions {
                    manage_ipfs_ids_in_groups: one(),
                    ..Default::default()
                },
                vec![
                    Operation::ManageActionsInGroup(G1),
                    Operation::RegisterAction,
                ],
            ),
            (
                Permissions {
                    add_pkp_to_groups: one(),
                    ..Default::default()
                },
                vec![Operation::AddPkpToGroup(G1)],
            ),
            (
                Permissions {
                    remove_pkp_from_groups: one(),
                    ..Default::default()
                },
                vec![Operation::RemovePkpFromGroup(G1)],
            ),
            (
                Permissions {
                    execute_in_groups: one(),
                    ..Default::default()
                },
                vec![Operation::ExecuteInGroup(G1)],
            ),
        ];
        for (perms, mut ops) in cases {
            ops.push(Operation::ReadAccount);
            assert_eq!(allowed(&usage(perms.clone())), names(&ops), "{perms:?}");
        }
    }

    /// `[0]` in each array covers every group, in all four arrays.
    #[test]
    fn zero_is_a_wildcard_in_all_four_arrays() {
        let all = || GroupSet::new(vec![0]);
        let cases: Vec<(Permissions, Vec<Operation>)> = vec![
            (
                Permissions {
                    manage_ipfs_ids_in_groups: all(),
                    ..Default::default()
                },
                vec![
                    Operation::ManageActionsInGroup(G1),
                    Operation::ManageActionsInGroup(G2),
                    Operation::RegisterAction,
                    Operation::DeleteAction,
                ],
            ),
            (
                Permissions {
                    add_pkp_to_groups: all(),
                    ..Default::default()
                },
                vec![Operation::AddPkpToGroup(G1), Operation::AddPkpToGroup(G2)],
            ),
            (
                Permissions {
                    remove_pkp_from_groups: all(),
                    ..Default::default()
                },
                vec![
                    Operation::RemovePkpFromGroup(G1),
                    Operation::RemovePkpFromGroup(G2),
                ],
            ),
            (
                Permissions {
                    execute_in_groups: all(),
                    ..Default::default()
                },
                vec![
                    Operation::ExecuteInGroup(G1),
                    Operation::ExecuteInGroup(G2),
                    Operation::ExecuteUnrestricted,
                ],
            ),
        ];
        for (perms, mut ops) in cases {
            ops.push(Operation::ReadAccount);
            assert_eq!(allowed(&usage(perms.clone())), names(&ops), "{perms:?}");
        }
        // The wildcard also covers group ids far from the listed ones.
        let perms = Permissions {
            execute_in_groups: all(),
            ..Default::default()
        };
        assert!(authorize(&usage(perms), Operation::ExecuteInGroup(GroupId(u64::MAX))).is_ok());
    }

    #[test]
    fn a_wildcard_mixed_with_ids_is_still_a_wildcard() {
        let perms = Permissions {
            execute_in_groups: GroupSet::new(vec![7, 0, 3]),
            ..Default::default()
        };
        assert!(perms.execute_in_groups.is_wildcard());
        assert!(authorize(&usage(perms), Operation::ExecuteInGroup(G2)).is_ok());
    }

    #[test]
    fn update_group_needs_all_three_grants_on_that_group() {
        let one = || GroupSet::new(vec![1]);
        let full = Permissions {
            manage_ipfs_ids_in_groups: one(),
            add_pkp_to_groups: one(),
            remove_pkp_from_groups: one(),
            ..Default::default()
        };
        assert!(authorize(&usage(full.clone()), Operation::UpdateGroup(G1)).is_ok());
        assert!(authorize(&usage(full.clone()), Operation::UpdateGroup(G2)).is_err());
        for missing in 0..3 {
            let mut p = full.clone();
            match missing {
                0 => p.manage_ipfs_ids_in_groups = GroupSet::default(),
                1 => p.add_pkp_to_groups = GroupSet::default(),
                _ => p.remove_pkp_from_groups = GroupSet::default(),
            }
            assert!(
                authorize(&usage(p), Operation::UpdateGroup(G1)).is_err(),
                "{missing}"
            );
        }
    }

    #[test]
    fn listing_other_groups_grants_nothing_here() {
        let perms = Permissions {
            manage_ipfs_ids_in_groups: GroupSet::new(vec![5, 9]),
            add_pkp_to_groups: GroupSet::new(vec![5, 9]),
            remove_pkp_from_groups: GroupSet::new(vec![5, 9]),
            execute_in_groups: GroupSet::new(vec![5, 9]),
            ..Default::default()
        };
        let key = usage(perms);
        for op in [
            Operation::ManageActionsInGroup(G1),
            Operation::AddPkpToGroup(G1),
            Operation::RemovePkpFromGroup(G1),
            Operation::ExecuteInGroup(G1),
            Operation::ExecuteUnrestricted,
            Operation::DeleteAction,
            Operation::UpdateGroup(G1),
        ] {
            assert!(authorize(&key, op).is_err(), "{op:?}");
        }
        assert!(authorize(&key, Operation::ExecuteInGroup(GroupId(9))).is_ok());
    }

    #[test]
    fn execution_grant_follows_the_execute_operations() {
        assert_eq!(
            execution_grant(&Credential::AccountKey),
            ExecutionGrant::Unrestricted
        );
        let with = |ids: Vec<u64>| {
            usage(Permissions {
                execute_in_groups: GroupSet::new(ids),
                ..Default::default()
            })
        };
        assert_eq!(
            execution_grant(&with(vec![0])),
            ExecutionGrant::Unrestricted
        );
        assert_eq!(
            execution_grant(&with(vec![9, 0, 5])),
            ExecutionGrant::Unrestricted
        );
        assert_eq!(
            execution_grant(&with(vec![9, 5])),
            ExecutionGrant::InGroups(vec![GroupId(5), GroupId(9)])
        );
        assert_eq!(
            execution_grant(&with(vec![])),
            ExecutionGrant::InGroups(vec![])
        );
        // Other grants give no execution, even wildcards.
        let manager = usage(Permissions {
            can_create_groups: true,
            manage_ipfs_ids_in_groups: GroupSet::new(vec![0]),
            add_pkp_to_groups: GroupSet::new(vec![0]),
            ..Default::default()
        });
        assert_eq!(execution_grant(&manager), ExecutionGrant::InGroups(vec![]));
    }

    /// The grant and `authorize` agree on every group: a group is granted exactly when
    /// `ExecuteInGroup` on it is allowed, and `Unrestricted` exactly when
    /// `ExecuteUnrestricted` is.
    #[test]
    fn execution_grant_agrees_with_authorize() {
        let keys = [
            Credential::AccountKey,
            usage(Permissions::default()),
            usage(Permissions {
                execute_in_groups: GroupSet::new(vec![1]),
                ..Default::default()
            }),
            usage(Permissions {
                execute_in_groups: GroupSet::new(vec![0]),
                ..Default::default()
            }),
        ];
        for key in keys {
            let unrestricted = authorize(&key, Operation::ExecuteUnrestricted).is_ok();
            match execution_grant(&key) {
                ExecutionGrant::Unrestricted => assert!(unrestricted, "{key:?}"),
                ExecutionGrant::InGroups(groups) => {
                    assert!(!unrestricted, "{key:?}");
                    for g in [G1, G2] {
                        assert_eq!(
                            groups.contains(&g),
                            authorize(&key, Operation::ExecuteInGroup(g)).is_ok(),
                            "{key:?} {g}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn an_unpermitted_action_is_named_not_the_groups() {
        let err = Denied::action_not_permitted("QmCid");
        assert_eq!(
            err.to_string(),
            "this usage key may not run QmCid: no group in its execute_in_groups permits this action"
        );
    }

    #[test]
    fn group_sets_are_canonical() {
        let set = GroupSet::new(vec![3, 1, 3, 2]);
        assert_eq!(set.ids(), &[1, 2, 3]);
        assert_eq!(set, GroupSet::new(vec![1, 2, 3]));
        assert!(!set.is_wildcard());
        assert!(GroupSet::default().is_empty());
    }

    #[test]
    fn denials_name_the_missing_permission() {
        let err = authorize(&usage(Permissions::default()), Operation::CreateGroup).unwrap_err();
        assert!(err.to_string().contains("can_create_groups"), "{err}");
        let err = authorize(
            &usage(Permissions::default()),
            Operation::ExecuteInGroup(G2),
        )
        .unwrap_err();
        assert!(err.to_string().contains("group 2"), "{err}");
    }
}
