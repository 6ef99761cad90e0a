//! Each command: build the client from the profile, verify (with progress on a terminal),
//! make the typed call, print a table or JSON.

use std::path::Path;
use std::time::Duration;

use appliance_client::api::accounts::NewAccountRequest;
use appliance_client::api::actions::{AddActionRequest, HashedCidRequest, ListActionsRequest};
use appliance_client::api::execution::LitActionRequest;
use appliance_client::api::groups::{
    AddActionToGroupRequest, AddGroupRequest, GroupIdRequest, GroupWalletRequest,
    RemoveActionFromGroupRequest, UpdateGroupRequest,
};
use appliance_client::api::usage_keys::{
    AddUsageApiKeyRequest, RemoveUsageApiKeyRequest, UpdateUsageApiKeyRequest, WirePermissions,
};
use appliance_client::api::wallets::{CreateWalletRequest, ListWalletsInGroupRequest};
use appliance_client::api::{PagingParams, WireU64};
use appliance_client::{Client, ClientError};
use zeroize::Zeroizing;

use crate::CliError;
use crate::args::{
    AccountCommand, ActionsCommand, BillingCommand, Cli, Command, GroupsCommand, KeyPermissions,
    KeysCommand, Page, ProfileCommand, ProfileSet, WalletsCommand,
};
use crate::output::{Progress, Table, clean, print, print_json};
use crate::profile::{self, Profile, Profiles};

/// Largest action file read (the server's own code limit is far below this).
const MAX_ACTION_FILE: u64 = 4 << 20;

pub async fn run(cli: Cli) -> Result<(), CliError> {
    let dir = profile::config_dir()?;
    match &cli.command {
        Command::Profile(ProfileCommand::Set(set)) => return profile_set(&cli, &dir, set),
        Command::Profile(ProfileCommand::Show) => return profile_show(&cli, &dir),
        _ => {}
    }
    let profiles = profile::load(&dir)?;
    let mut chosen = profiles
        .profiles
        .get(&cli.profile)
        .cloned()
        .unwrap_or_default();
    if let Some(url) = &cli.url {
        chosen.url = Some(url.clone());
    }
    if let Some(key) = &cli.api_key {
        chosen.api_key = Some(key.clone());
    }
    os_overrides(&cli, &mut chosen);
    chosen.check(&cli.profile)?;
    if chosen.url.is_none() {
        return Err(profile::ProfileError::Missing(cli.profile.clone()).into());
    }
    let session = Session::new(&cli, chosen)?;
    match &cli.command {
        Command::Profile(_) => Ok(()),
        Command::Verify => session.verify_command().await,
        Command::Account(cmd) => session.account(cmd, &dir).await,
        Command::Keys(cmd) => session.keys(cmd).await,
        Command::Groups(cmd) => session.groups(cmd).await,
        Command::Wallets(cmd) => session.wallets(cmd).await,
        Command::Actions(cmd) => session.actions(cmd).await,
        Command::Billing(cmd) => session.billing(cmd).await,
        Command::Operator(cmd) => session.operator(cmd).await,
    }
}

/// This run's `--os-measurements` and `--allow-unpinned-os`, over the profile's.
fn os_overrides(cli: &Cli, profile: &mut Profile) {
    if let Some(file) = &cli.os_measurements {
        profile.os_measurements = Some(file.clone());
    }
    if let Some(allow) = cli.allow_unpinned_os {
        profile.allow_unpinned_os = allow;
    }
}

fn profile_set(cli: &Cli, dir: &Path, set: &ProfileSet) -> Result<(), CliError> {
    if set.clear_os_measurements && cli.os_measurements.is_some() {
        return Err(CliError::Input(
            "--os-measurements and --clear-os-measurements contradict each other".into(),
        ));
    }
    let mut profiles = profile::load(dir)?;
    let entry = profiles.profiles.entry(cli.profile.clone()).or_default();
    if let Some(url) = &cli.url {
        entry.url = Some(url.trim_end_matches('/').to_owned());
    }
    if let Some(key) = &cli.api_key {
        entry.api_key = Some(key.clone());
    }
    if set.api_key_stdin {
        let mut line = Zeroizing::new(String::new());
        std::io::stdin()
            .read_line(&mut line)
            .map_err(|e| CliError::Input(format!("reading the API key from stdin: {e}")))?;
        let key = line.trim();
        if key.is_empty() {
            return Err(CliError::Input("stdin held no API key".into()));
        }
        entry.api_key = Some(key.to_owned());
    }
    if set.clear_api_key {
        entry.api_key = None;
    }
    if let Some(ca) = &set.ca_file {
        entry.ca_file = Some(absolute(ca)?);
    }
    if let Some(allow) = set.allow_simulated {
        entry.allow_simulated = allow;
    }
    if let Some(allow) = set.allow_stale {
        entry.allow_stale = allow;
    }
    if let Some(file) = &cli.os_measurements {
        entry.os_measurements = Some(absolute(file)?);
    }
    if set.clear_os_measurements {
        entry.os_measurements = None;
    }
    if let Some(allow) = cli.allow_unpinned_os {
        entry.allow_unpinned_os = allow;
    }
    if !set.compose_hashes.is_empty() {
        entry.compose_hashes = set.compose_hashes.clone();
    }
    if !set.accept_status.is_empty() {
        entry.accept_statuses = set.accept_status.clone();
    }
    if let Some(rpc) = &set.rpc_url {
        entry.rpc_url = Some(rpc.clone());
    }
    if let Some(pccs) = &set.pccs_url {
        entry.pccs_url = Some(pccs.clone());
        entry.collateral = None;
    }
    if let Some(file) = &set.collateral {
        entry.collateral = Some(absolute(file)?);
        entry.pccs_url = None;
    }
    if let Some(dns) = set.dns {
        entry.dns = Some(dns);
    }
    if let Some(domain) = &set.caa_domain {
        entry.caa_domain = Some(domain.clone());
    }
    if !set.skip.is_empty() {
        entry.skip = set.skip.clone();
    }
    if let Some(secs) = set.cache_secs {
        entry.cache_secs = Some(secs);
    }
    if let Some(secs) = set.timeout_secs {
        entry.timeout_secs = Some(secs);
    }
    entry.check(&cli.profile)?;
    // The OS measurements file must be a policy now, not at the first verification.
    entry.policy()?;
    let shown = redacted(entry);
    let path = profile::save(dir, &profiles)?;
    show_profile(cli, &path, &shown);
    Ok(())
}

fn profile_show(cli: &Cli, dir: &Path) -> Result<(), CliError> {
    let profiles = profile::load(dir)?;
    let chosen = profiles
        .profiles
        .get(&cli.profile)
        .ok_or_else(|| profile::ProfileError::Missing(cli.profile.clone()))?;
    show_profile(cli, &profile::path_in(dir), &redacted(chosen));
    Ok(())
}

/// The profile as shown: the key replaced by whether there is one.
fn redacted(p: &Profile) -> Profile {
    Profile {
        api_key: p.api_key.as_ref().map(|_| "(set, not shown)".to_owned()),
        ..p.clone()
    }
}

fn show_profile(cli: &Cli, path: &Path, shown: &Profile) {
    if cli.json {
        print_json(&serde_json::json!({
            "profile": cli.profile,
            "file": path,
            "settings": shown,
        }));
        return;
    }
    let mut single = Profiles::default();
    single.profiles.insert(cli.profile.clone(), shown.clone());
    let text = toml::to_string_pretty(&single).unwrap_or_default();
    print(&format!("# {}\n{text}", path.display()));
}

fn absolute(path: &Path) -> Result<std::path::PathBuf, CliError> {
    std::path::absolute(path).map_err(|e| CliError::Input(format!("{}: {e}", path.display())))
}

/// A configured client and how to print.
struct Session {
    client: Client,
    json: bool,
    profile_name: String,
}

fn page(p: &Page) -> PagingParams {
    PagingParams {
        page_number: p.page,
        page_size: p.page_size,
    }
}

fn ids(v: &[u64]) -> Vec<WireU64> {
    v.iter().copied().map(WireU64).collect()
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn join(v: &[WireU64]) -> String {
    if v.is_empty() {
        return "-".to_owned();
    }
    v.iter()
        .map(|g| g.0.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl Session {
    fn new(cli: &Cli, p: Profile) -> Result<Self, CliError> {
        let url = p.url.clone().unwrap_or_default();
        let mut builder = Client::builder(url).policy(p.policy()?);
        if let Some(key) = &p.api_key {
            builder = builder.api_key(key.clone());
        }
        if let Some(ca) = &p.ca_file {
            builder = builder.ca_file(ca.clone());
        }
        if let Some(secs) = p.timeout_secs {
            builder = builder.timeout(Duration::from_secs(secs));
        }
        if let Some(addr) = cli.connect {
            builder = builder.connect_to(addr);
        }
        Ok(Self {
            client: builder.build()?,
            json: cli.json,
            profile_name: cli.profile.clone(),
        })
    }

    /// Verifies the deployment (a spinner on a terminal) before any call.
    async fn verified(&self) -> Result<std::sync::Arc<appliance_client::Verification>, CliError> {
        let progress = Progress::start(format!("verifying {}", self.client.base_url()));
        let result = self.client.verify().await;
        progress.finish();
        Ok(result?)
    }

    /// Runs `call` after the verification, with a spinner labelled `label`.
    async fn call<T>(
        &self,
        label: &str,
        call: impl std::future::Future<Output = Result<T, ClientError>>,
    ) -> Result<T, CliError> {
        self.verified().await?;
        let progress = Progress::start(label.to_owned());
        let result = call.await;
        progress.finish();
        Ok(result?)
    }

    fn out<T: serde::Serialize>(&self, value: &T, text: impl FnOnce(&T) -> String) {
        if self.json {
            print_json(value);
        } else {
            print(&text(value));
        }
    }

    async fn verify_command(&self) -> Result<(), CliError> {
        let progress = Progress::start(format!("verifying {}", self.client.base_url()));
        let result = self.client.verify().await;
        progress.finish();
        match result {
            Ok(v) => {
                self.out(&*v, |v| {
                    let mut s = v.report.to_text();
                    s.push_str(&format!("compose hash: {}\n", v.compose_hash));
                    if let Some(app) = &v.app_id {
                        s.push_str(&format!("app id: {app}\n"));
                    }
                    for leaf in &v.pinned_leaves {
                        s.push_str(&format!("pinned certificate: sha256 {leaf}\n"));
                    }
                    if v.simulated {
                        s.push_str(
                            "WARNING: simulated quote (development stack): NOT confidential\n",
                        );
                    }
                    s
                });
                Ok(())
            }
            Err(ClientError::NotVerified { report }) if self.json => {
                print_json(&report);
                Err(ClientError::NotVerified { report }.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn account(&self, cmd: &AccountCommand, dir: &Path) -> Result<(), CliError> {
        match cmd {
            AccountCommand::New {
                name,
                description,
                email,
                save,
            } => {
                let request = NewAccountRequest {
                    account_name: name.clone(),
                    account_description: description.clone(),
                    email: email.clone(),
                };
                let created = self
                    .call("creating the account", self.client.new_account(&request))
                    .await?;
                let key = Zeroizing::new(created.api_key.clone());
                if *save {
                    let mut profiles = profile::load(dir)?;
                    let entry = profiles
                        .profiles
                        .entry(self.profile_name.clone())
                        .or_default();
                    if entry.url.is_none() {
                        entry.url = Some(self.client.base_url().to_owned());
                    }
                    entry.api_key = Some(key.to_string());
                    profile::save(dir, &profiles)?;
                }
                let saved = *save;
                let profile_name = self.profile_name.clone();
                self.out(&created, |c| {
                    let mut s = format!(
                        "account key: {}\nwallet: {}\n",
                        c.api_key,
                        clean(&c.wallet_address)
                    );
                    s.push_str(&if saved {
                        format!("(the key is stored in profile {profile_name:?})\n")
                    } else {
                        "(this key is shown once: store it, or run again with --save)\n".to_owned()
                    });
                    s
                });
                Ok(())
            }
            AccountCommand::Exists => {
                let exists = self.call("asking", self.client.account_exists()).await?;
                self.out(&exists, |e| format!("{}\n", yes(*e)));
                Ok(())
            }
        }
    }

    async fn keys(&self, cmd: &KeysCommand) -> Result<(), CliError> {
        match cmd {
            KeysCommand::Add {
                name,
                description,
                permissions: p,
            } => {
                let request = AddUsageApiKeyRequest {
                    name: name.clone(),
                    description: description.clone(),
                    ..AddUsageApiKeyRequest::default()
                }
                .with_permissions(wire_permissions(p));
                let added = self
                    .call("adding the key", self.client.add_usage_api_key(&request))
                    .await?;
                self.out(&added, |a| {
                    format!(
                        "usage key: {}\nhash: {}\n(this key is shown once: store it)\n",
                        a.usage_api_key, a.api_key_hash
                    )
                });
            }
            KeysCommand::List(p) => {
                let keys = self
                    .call("listing", self.client.list_api_keys(&page(p)))
                    .await?;
                self.out(&keys, |keys| {
                    Table::of(
                        &[
                            "ID",
                            "NAME",
                            "HASH",
                            "GROUPS+",
                            "GROUPS-",
                            "WALLETS+",
                            "RUN IN",
                            "MANAGE IN",
                        ],
                        keys,
                        |k| {
                            vec![
                                clean(&k.id),
                                clean(&k.name),
                                clean(&k.api_key_hash),
                                yes(k.can_create_groups).into(),
                                yes(k.can_delete_groups).into(),
                                yes(k.can_create_pkps).into(),
                                join(&k.execute_in_groups),
                                join(&k.manage_ipfs_ids_in_groups),
                            ]
                        },
                    )
                });
            }
            KeysCommand::Update {
                key,
                name,
                description,
                permissions,
            } => {
                let request = update_request(key, name, description, permissions);
                let done = self
                    .call(
                        "updating the key",
                        self.client.update_usage_api_key(&request),
                    )
                    .await?;
                self.out(&done, |_| "updated\n".to_owned());
            }
            KeysCommand::Remove { key } => {
                let request = RemoveUsageApiKeyRequest {
                    usage_api_key: key.as_str().into(),
                };
                let done = self
                    .call(
                        "removing the key",
                        self.client.remove_usage_api_key(&request),
                    )
                    .await?;
                self.out(&done, |_| "removed\n".to_owned());
            }
        }
        Ok(())
    }

    async fn groups(&self, cmd: &GroupsCommand) -> Result<(), CliError> {
        let c = &self.client;
        match cmd {
            GroupsCommand::Add {
                name,
                description,
                wallets,
                actions,
            } => {
                let request = AddGroupRequest {
                    group_name: name.clone(),
                    group_description: description.clone(),
                    pkp_ids_permitted: wallets.iter().map(|w| w.as_str().into()).collect(),
                    cid_hashes_permitted: actions.iter().map(|a| a.as_str().into()).collect(),
                };
                let added = self.call("adding the group", c.add_group(&request)).await?;
                self.out(&added, |a| format!("group: {}\n", clean(&a.group_id)));
            }
            GroupsCommand::List(p) => {
                let groups = self.call("listing", c.list_groups(&page(p))).await?;
                self.out(&groups, |groups| {
                    Table::of(
                        &["ID", "NAME", "WALLETS", "ACTIONS", "DESCRIPTION"],
                        groups,
                        |g| {
                            vec![
                                clean(&g.id),
                                clean(&g.name),
                                g.pkp_ids_permitted.len().to_string(),
                                g.cid_hashes_permitted.len().to_string(),
                                clean(&g.description),
                            ]
                        },
                    )
                });
            }
            GroupsCommand::Update {
                group,
                name,
                description,
                wallets,
                actions,
            } => {
                let request = UpdateGroupRequest {
                    group_id: WireU64(*group),
                    name: name.clone(),
                    description: description.clone(),
                    pkp_ids_permitted: wallets.iter().map(|w| w.as_str().into()).collect(),
                    cid_hashes_permitted: actions.iter().map(|a| a.as_str().into()).collect(),
                };
                let done = self
                    .call("updating the group", c.update_group(&request))
                    .await?;
                self.out(&done, |_| "updated\n".to_owned());
            }
            GroupsCommand::Remove { group } => {
                let request = GroupIdRequest {
                    group_id: WireU64(*group),
                };
                let done = self
                    .call("removing the group", c.remove_group(&request))
                    .await?;
                self.out(&done, |_| "removed\n".to_owned());
            }
            GroupsCommand::AddWallet { group, pkp_id }
            | GroupsCommand::RemoveWallet { group, pkp_id } => {
                let request = GroupWalletRequest {
                    group_id: WireU64(*group),
                    pkp_id: pkp_id.as_str().into(),
                };
                let done = if matches!(cmd, GroupsCommand::AddWallet { .. }) {
                    self.call("adding the wallet", c.add_pkp_to_group(&request))
                        .await?
                } else {
                    self.call("removing the wallet", c.remove_pkp_from_group(&request))
                        .await?
                };
                self.out(&done, |_| "done\n".to_owned());
            }
            GroupsCommand::AddAction { group, cid } => {
                let request = AddActionToGroupRequest {
                    group_id: WireU64(*group),
                    action_ipfs_cid: cid.as_str().into(),
                };
                let added = self
                    .call("adding the action", c.add_action_to_group(&request))
                    .await?;
                self.out(&added, |a| {
                    format!("hashed cid: {}\n", clean(&a.hashed_cid))
                });
            }
            GroupsCommand::RemoveAction { group, hashed_cid } => {
                let request = RemoveActionFromGroupRequest {
                    group_id: WireU64(*group),
                    hashed_cid: hashed_cid.as_str().into(),
                };
                let done = self
                    .call("removing the action", c.remove_action_from_group(&request))
                    .await?;
                self.out(&done, |_| "removed\n".to_owned());
            }
        }
        Ok(())
    }

    async fn wallets(&self, cmd: &WalletsCommand) -> Result<(), CliError> {
        let c = &self.client;
        match cmd {
            WalletsCommand::New { name, description } => {
                let request = CreateWalletRequest {
                    name: name.clone(),
                    description: description.clone(),
                };
                let made = self
                    .call("creating the wallet", c.create_wallet(&request))
                    .await?;
                self.out(&made, |w| {
                    format!(
                        "wallet: {}\npkp id: {}\n",
                        clean(&w.wallet_address),
                        clean(&w.pkp_id)
                    )
                });
            }
            WalletsCommand::List { group, page: p } => {
                let wallets = match group {
                    Some(g) => {
                        let request = ListWalletsInGroupRequest {
                            group_id: WireU64(*g),
                            paging: page(p),
                        };
                        self.call("listing", c.list_wallets_in_group(&request))
                            .await?
                    }
                    None => self.call("listing", c.list_wallets(&page(p))).await?,
                };
                self.out(&wallets, |wallets| {
                    Table::of(&["ID", "ADDRESS", "NAME", "PKP ID"], wallets, |w| {
                        vec![
                            clean(&w.id),
                            clean(&w.wallet_address),
                            clean(&w.name),
                            clean(&w.pkp_id),
                        ]
                    })
                });
            }
        }
        Ok(())
    }

    async fn actions(&self, cmd: &ActionsCommand) -> Result<(), CliError> {
        let c = &self.client;
        match cmd {
            ActionsCommand::Add {
                file,
                name,
                description,
                group,
            } => {
                let code = read_action(file)?;
                let cid = self
                    .call("computing the CID", c.get_lit_action_ipfs_id(&code))
                    .await?;
                let request = AddActionRequest {
                    action_ipfs_cid: cid.as_str().into(),
                    name: name.clone(),
                    description: description.clone(),
                };
                let added = self
                    .call("registering the action", c.add_action(&request))
                    .await?;
                if let Some(g) = group {
                    let request = AddActionToGroupRequest {
                        group_id: WireU64(*g),
                        action_ipfs_cid: cid.as_str().into(),
                    };
                    self.call("adding it to the group", c.add_action_to_group(&request))
                        .await?;
                }
                let shown = serde_json::json!({
                    "ipfs_cid": cid,
                    "hashed_cid": added.hashed_cid,
                    "group_id": group.map(|g| g.to_string()),
                });
                self.out(&shown, |_| {
                    format!(
                        "cid: {}\nhashed cid: {}\n",
                        clean(&cid),
                        clean(&added.hashed_cid)
                    )
                });
            }
            ActionsCommand::List { group, page: p } => {
                let request = ListActionsRequest {
                    group_id: group.map(WireU64),
                    paging: page(p),
                };
                let actions = self.call("listing", c.list_actions(&request)).await?;
                self.out(&actions, |actions| {
                    Table::of(&["ID", "NAME", "CID", "HASHED CID"], actions, |a| {
                        vec![
                            clean(&a.id),
                            clean(&a.name),
                            clean(&a.ipfs_cid),
                            clean(&a.hashed_cid),
                        ]
                    })
                });
            }
            ActionsCommand::Remove { hashed_cid } => {
                let request = HashedCidRequest {
                    hashed_cid: hashed_cid.as_str().into(),
                };
                let done = self
                    .call("removing the action", c.delete_action(&request))
                    .await?;
                self.out(&done, |_| "removed\n".to_owned());
            }
            ActionsCommand::Run { file, cid, params } => {
                let js_params = match params {
                    Some(text) => Some(
                        serde_json::value::RawValue::from_string(text.clone()).map_err(|e| {
                            CliError::Input(format!("--params is not valid JSON: {e}"))
                        })?,
                    ),
                    None => None,
                };
                let request = LitActionRequest {
                    code: match file {
                        Some(f) => Some(read_action(f)?),
                        None => None,
                    },
                    ipfs_id: cid.as_deref().map(Into::into),
                    js_params,
                };
                let ran = self
                    .call("running the action", c.lit_action(&request))
                    .await?;
                self.out(&ran, |r| {
                    let mut s = String::new();
                    if !r.logs.is_empty() {
                        s.push_str("logs:\n");
                        for line in r.logs.lines() {
                            s.push_str(&format!("  {}\n", clean(line)));
                        }
                    }
                    s.push_str(&format!("response: {}\n", r.response));
                    s
                });
                if ran.has_error {
                    let why = ran
                        .error
                        .as_ref()
                        .map(|e| format!("{}: {}", e.kind, e.message))
                        .unwrap_or_else(|| "(no detail)".to_owned());
                    return Err(CliError::Action(clean(&why)));
                }
            }
        }
        Ok(())
    }

    async fn operator(&self, cmd: &crate::args::OperatorCommand) -> Result<(), CliError> {
        let verified = self.verified().await?;
        let progress = Progress::start("asking".to_owned());
        let result = crate::operator::run(&self.client, &verified, cmd).await;
        progress.finish();
        let outcome = result?;
        self.out(&outcome.json, |_| outcome.text.clone());
        Ok(())
    }

    async fn billing(&self, cmd: &BillingCommand) -> Result<(), CliError> {
        match cmd {
            BillingCommand::Balance => {
                let balance = self.call("asking", self.client.balance()).await?;
                self.out(&balance, |b| format!("{}\n", clean(&b.balance_display)));
            }
            BillingCommand::Prices => {
                let prices = self.call("asking", self.client.prices()).await?;
                self.out(&prices, |p| {
                    let mut t = Table::new(&["ITEM", "CENTS"]);
                    for (item, cents) in [
                        ("management write", p.management_write_cents),
                        ("action second", p.action_second_cents),
                        ("read", p.read_cents),
                        ("minimum payment", p.minimum_payment_cents),
                        ("initial credit", p.initial_credit_cents),
                    ] {
                        t.row(vec![item.to_owned(), cents.to_string()]);
                    }
                    format!(
                        "billing {} ({})\n{}",
                        if p.billing_enabled { "on" } else { "off" },
                        clean(&p.currency),
                        t.render()
                    )
                });
            }
        }
        Ok(())
    }
}

fn update_request(
    key: &str,
    name: &Option<String>,
    description: &Option<String>,
    p: &KeyPermissions,
) -> UpdateUsageApiKeyRequest {
    UpdateUsageApiKeyRequest {
        usage_api_key: key.into(),
        name: name.clone(),
        description: description.clone(),
        ..UpdateUsageApiKeyRequest::default()
    }
    .with_permissions(wire_permissions(p))
}

/// The permission flags of `keys add` and `keys update` as the requests' fields.
fn wire_permissions(p: &KeyPermissions) -> WirePermissions {
    WirePermissions {
        can_create_groups: p.can_create_groups,
        can_delete_groups: p.can_delete_groups,
        can_create_pkps: p.can_create_pkps,
        manage_ipfs_ids_in_groups: ids(&p.manage_ipfs_ids_in_groups),
        add_pkp_to_groups: ids(&p.add_pkp_to_groups),
        remove_pkp_from_groups: ids(&p.remove_pkp_from_groups),
        execute_in_groups: ids(&p.execute_in_groups),
    }
}

/// Reads an action's code, refusing a file too large to be one.
fn read_action(path: &Path) -> Result<String, CliError> {
    let fail = |e: String| CliError::Input(format!("{}: {e}", path.display()));
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if meta.len() > MAX_ACTION_FILE {
        return Err(fail(format!(
            "{} bytes; an action is at most {MAX_ACTION_FILE} bytes here",
            meta.len()
        )));
    }
    std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use appliance_client::evidence::os_image::OsPolicy;
    use clap::{CommandFactory, Parser};

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("appliance-cli").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Each permission flag of `keys update` lands in the request field it is named for.
    #[test]
    fn key_permission_flags_reach_their_fields() {
        let cli = parse(&[
            "keys",
            "update",
            "0xab",
            "--can-delete-groups",
            "--manage-actions-in-group",
            "1",
            "--add-wallet-to-group",
            "2",
            "--remove-wallet-from-group",
            "3",
            "--execute-in-group",
            "4",
            "--execute-in-group",
            "44",
        ]);
        let Command::Keys(KeysCommand::Update {
            key,
            name,
            description,
            permissions,
        }) = &cli.command
        else {
            panic!("{cli:?}");
        };
        let request = update_request(key, name, description, permissions);
        assert_eq!(
            serde_json::to_value(&request).unwrap(),
            serde_json::json!({
                "usage_api_key": "0xab",
                "can_create_groups": false,
                "can_delete_groups": true,
                "can_create_pkps": false,
                "manage_ipfs_ids_in_groups": ["1"],
                "add_pkp_to_groups": ["2"],
                "remove_pkp_from_groups": ["3"],
                "execute_in_groups": ["4", "44"],
            })
        );
    }

    /// `--os-measurements` and `--allow-unpinned-os` reach the verification policy of any
    /// command, over the profile's settings, before or after the command's name.
    #[test]
    fn os_flags_reach_the_policy() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("os.json");
        std::fs::write(&file, crate::profile::tests::os_policy_json()).unwrap();
        let path = file.to_str().unwrap();
        let expected = OsPolicy::load(&file).unwrap();

        for args in [
            vec!["--os-measurements", path, "--allow-unpinned-os", "verify"],
            vec!["verify", "--os-measurements", path, "--allow-unpinned-os"],
            vec![
                "--os-measurements",
                path,
                "--allow-unpinned-os=true",
                "wallets",
                "list",
            ],
        ] {
            let mut profile = Profile::default();
            os_overrides(&parse(&args), &mut profile);
            let policy = profile.policy().unwrap();
            assert_eq!(policy.os_measurements.as_ref(), Some(&expected), "{args:?}");
            assert!(policy.allow_unpinned_os, "{args:?}");
        }

        // Nothing given: the profile's settings stand; `=false` refuses what it accepts.
        let mut profile = Profile {
            os_measurements: Some(file.clone()),
            allow_unpinned_os: true,
            ..Profile::default()
        };
        os_overrides(&parse(&["verify"]), &mut profile);
        assert_eq!(profile.os_measurements.as_deref(), Some(file.as_path()));
        assert!(profile.allow_unpinned_os);
        os_overrides(
            &parse(&["--allow-unpinned-os=false", "verify"]),
            &mut profile,
        );
        assert!(!profile.policy().unwrap().allow_unpinned_os);
        // The strict default: nothing pinned, nothing accepted unpinned.
        let policy = Profile::default().policy().unwrap();
        assert_eq!(policy.os_measurements, None);
        assert!(!policy.allow_unpinned_os);

        // The flag takes no separate value (the next word is the command).
        assert!(
            Cli::try_parse_from(["appliance-cli", "--allow-unpinned-os", "false", "verify"])
                .is_err()
        );
        // Clearing and setting the file at once is refused, and nothing is written.
        let both = parse(&[
            "--os-measurements",
            path,
            "profile",
            "set",
            "--clear-os-measurements",
        ]);
        let Command::Profile(ProfileCommand::Set(set)) = &both.command else {
            panic!("{both:?}");
        };
        let dir = tmp.path().join("config");
        let err = profile_set(&both, &dir, set).unwrap_err();
        assert!(err.to_string().contains("contradict"), "{err}");
        assert!(!dir.exists());
    }
}
