//! Every `/core/v1` endpoint described as data: its method, path, credential, how the
//! request travels, and its request and response types. A generic client needs nothing
//! else to call an endpoint, and the appliance's tests check that [`ALL`] is exactly the
//! set of routes the server documents (`appliance/tests/api_endpoints.rs`).
//!
//! Conventions a client follows:
//! * the URL is the origin, then [`PREFIX`], then [`Endpoint::PATH`];
//! * [`Input::Json`]: the request is the JSON body (`Content-Type: application/json`);
//!   [`Input::Query`]: the request is the query string (its fields are scalars, absent
//!   optional ones are left out); [`Input::None`]: no body and no query (`Request = ()`);
//! * a 2xx answer's body is `Response` as JSON; any other status carries
//!   [`crate::error::ErrorBody`].

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::accounts::{NewAccountRequest, NewAccountResponse};
use crate::actions::{
    ActionItem, AddActionRequest, HashedCidRequest, ListActionsRequest, UpdateActionMetadataRequest,
};
use crate::billing::{
    BalanceResponse, ConfirmPaymentRequest, ConfirmPaymentResponse, CreatePaymentIntentRequest,
    CreatePaymentIntentResponse, PricesResponse, StripeConfigResponse, UsageItem, UsageRequest,
};
use crate::chain::NodeChainConfig;
use crate::execution::{ClientConfig, LitActionRequest, LitActionResponse};
use crate::groups::{
    AddActionToGroupRequest, AddGroupRequest, AddGroupResponse, GroupIdRequest, GroupItem,
    GroupWalletRequest, ListGroupsRequest, RemoveActionFromGroupRequest, UpdateGroupRequest,
};
use crate::signatures::{
    ConvertRequest, ConvertResponse, SignedRequest, SignedUsageKeyResponse, SignedWalletResponse,
};
use crate::usage_keys::{
    AddUsageApiKeyRequest, AddUsageApiKeyResponse, ListApiKeysRequest, RemoveUsageApiKeyRequest,
    UpdateUsageApiKeyMetadataRequest, UpdateUsageApiKeyRequest, UsageKeyItem,
};
use crate::wallets::{
    CreateWalletRequest, CreateWalletResponse, ListWalletsInGroupRequest, ListWalletsRequest,
    WalletItem,
};
use crate::{HashedCidResponse, Success};

/// The path prefix of every endpoint described here.
pub const PREFIX: &str = "/core/v1";

/// The HTTP methods the `/core/v1` routes use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    /// The method's name on the wire: `GET`, `POST`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
        }
    }
}

/// The credential an endpoint needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Auth {
    /// None (such endpoints are rate-limited per client address).
    None,
    /// An API key is optional (`Authorization: Bearer <key>` or `X-Api-Key`); with one,
    /// the call acts for the key's account.
    OptionalApiKey,
    /// An API key, `Authorization: Bearer <key>` or `X-Api-Key`: the account key, or a
    /// usage key where the endpoint allows it (its OpenAPI description says which).
    ApiKey,
    /// An API key, or for a ChainSecured account an `X-Wallet-Auth` header: standard
    /// base64 of `{"typed_data","signature"}`, a `BillingAuth` EIP-712 signature by the
    /// account's admin wallet.
    ApiKeyOrWalletAuth,
    /// No header: the body itself is wallet-signed (`typed_data` and `signature`, see
    /// [`crate::signatures::SignedRequest`]).
    BodySignature,
}

/// How an endpoint's request travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Input {
    /// Nothing is sent (`Request = ()`).
    None,
    /// The request is the query string.
    Query,
    /// The request is the JSON body.
    Json,
}

/// One `/core/v1` endpoint.
pub trait Endpoint {
    const METHOD: Method;
    /// The path under [`PREFIX`], e.g. `/add_group`.
    const PATH: &'static str;
    const AUTH: Auth;
    const INPUT: Input;
    /// What the client sends (as [`Self::INPUT`] says).
    type Request: Serialize + DeserializeOwned;
    /// The JSON body of a 2xx answer.
    type Response: Serialize + DeserializeOwned;
}

/// Something done for each endpoint type, with [`for_each`] (a test over every endpoint,
/// a generated client method per endpoint).
pub trait Visit {
    fn visit<E: Endpoint>(&mut self);
}

/// Declares one unit struct per endpoint, its `Endpoint` impl, and [`ALL`] from the same
/// list, so that the list cannot miss a described endpoint.
macro_rules! endpoints {
    ($(
        $(#[$doc:meta])*
        $name:ident: $method:ident $path:literal, $auth:ident, $input:ident, $req:ty => $resp:ty;
    )*) => {
        $(
            $(#[$doc])*
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            pub struct $name;

            impl Endpoint for $name {
                const METHOD: Method = Method::$method;
                const PATH: &'static str = $path;
                const AUTH: Auth = Auth::$auth;
                const INPUT: Input = Input::$input;
                type Request = $req;
                type Response = $resp;
            }
        )*

        /// Every `/core/v1` endpoint's method and path (under [`PREFIX`]), in the
        /// server's route order.
        pub const ALL: &[(Method, &str)] = &[$(($name::METHOD, $name::PATH)),*];

        /// Calls `visitor.visit::<E>()` for every endpoint `E`, in the order of [`ALL`].
        pub fn for_each(visitor: &mut impl Visit) {
            $( visitor.visit::<$name>(); )*
        }
    };
}

endpoints! {
    // accounts
    /// Creates an API-mode account; returns its account key, once.
    NewAccount: Post "/new_account", None, Json, NewAccountRequest => NewAccountResponse;
    /// Whether the presented key is a live account key.
    AccountExists: Get "/account_exists", ApiKey, None, () => bool;

    // usage keys (account key only)
    AddUsageApiKey: Post "/add_usage_api_key", ApiKey, Json, AddUsageApiKeyRequest => AddUsageApiKeyResponse;
    ListApiKeys: Get "/list_api_keys", ApiKey, Query, ListApiKeysRequest => Vec<UsageKeyItem>;
    UpdateUsageApiKey: Post "/update_usage_api_key", ApiKey, Json, UpdateUsageApiKeyRequest => Success;
    UpdateUsageApiKeyMetadata: Post "/update_usage_api_key_metadata", ApiKey, Json, UpdateUsageApiKeyMetadataRequest => Success;
    RemoveUsageApiKey: Post "/remove_usage_api_key", ApiKey, Json, RemoveUsageApiKeyRequest => Success;

    // wallets
    /// Creates a wallet, optionally named (the body may be empty on the wire).
    CreateWallet: Post "/create_wallet", ApiKey, Json, CreateWalletRequest => CreateWalletResponse;
    /// The GET form of [`CreateWallet`]: an unnamed wallet.
    CreateWalletGet: Get "/create_wallet", ApiKey, None, () => CreateWalletResponse;
    ListWallets: Get "/list_wallets", ApiKey, Query, ListWalletsRequest => Vec<WalletItem>;
    ListWalletsInGroup: Get "/list_wallets_in_group", ApiKey, Query, ListWalletsInGroupRequest => Vec<WalletItem>;

    // groups
    AddGroup: Post "/add_group", ApiKey, Json, AddGroupRequest => AddGroupResponse;
    ListGroups: Get "/list_groups", ApiKey, Query, ListGroupsRequest => Vec<GroupItem>;
    UpdateGroup: Post "/update_group", ApiKey, Json, UpdateGroupRequest => Success;
    RemoveGroup: Post "/remove_group", ApiKey, Json, GroupIdRequest => Success;
    AddPkpToGroup: Post "/add_pkp_to_group", ApiKey, Json, GroupWalletRequest => Success;
    RemovePkpFromGroup: Post "/remove_pkp_from_group", ApiKey, Json, GroupWalletRequest => Success;
    AddActionToGroup: Post "/add_action_to_group", ApiKey, Json, AddActionToGroupRequest => HashedCidResponse;
    RemoveActionFromGroup: Post "/remove_action_from_group", ApiKey, Json, RemoveActionFromGroupRequest => Success;

    // actions
    AddAction: Post "/add_action", ApiKey, Json, AddActionRequest => HashedCidResponse;
    DeleteAction: Post "/delete_action", ApiKey, Json, HashedCidRequest => Success;
    UpdateActionMetadata: Post "/update_action_metadata", ApiKey, Json, UpdateActionMetadataRequest => Success;
    ListActions: Get "/list_actions", ApiKey, Query, ListActionsRequest => Vec<ActionItem>;
    /// The CID of the code (the body is the code as a JSON string).
    GetLitActionIpfsId: Post "/get_lit_action_ipfs_id", OptionalApiKey, Json, String => String;

    // execution
    LitAction: Post "/lit_action", ApiKey, Json, LitActionRequest => LitActionResponse;
    GetLitActionClientConfig: Get "/get_lit_action_client_config", None, None, () => ClientConfig;

    // chain
    GetNodeChainConfig: Get "/get_node_chain_config", None, None, () => NodeChainConfig;
    /// The API payer addresses (EIP-55).
    GetApiPayers: Get "/get_api_payers", None, None, () => Vec<String>;
    /// The admin payer address (EIP-55).
    GetAdminApiPayer: Get "/get_admin_api_payer", None, None, () => String;

    // billing
    StripeConfig: Get "/billing/stripe_config", None, None, () => StripeConfigResponse;
    Balance: Get "/billing/balance", ApiKeyOrWalletAuth, None, () => BalanceResponse;
    /// The account's credits and charges, newest first (the account key, or
    /// `X-Wallet-Auth`; not a usage key).
    Usage: Get "/billing/usage", ApiKeyOrWalletAuth, Query, UsageRequest => Vec<UsageItem>;
    CreatePaymentIntent: Post "/billing/create_payment_intent", ApiKeyOrWalletAuth, Json, CreatePaymentIntentRequest => CreatePaymentIntentResponse;
    ConfirmPayment: Post "/billing/confirm_payment", ApiKeyOrWalletAuth, Json, ConfirmPaymentRequest => ConfirmPaymentResponse;
    Prices: Get "/billing/prices", None, None, () => PricesResponse;

    // wallet signatures
    CreateWalletWithSignature: Post "/create_wallet_with_signature", BodySignature, Json, SignedRequest => SignedWalletResponse;
    AddUsageApiKeyWithSignature: Post "/add_usage_api_key_with_signature", BodySignature, Json, SignedRequest => SignedUsageKeyResponse;
    /// The account key in the header, and in the body the new admin wallet's
    /// `ConvertAccount` signature.
    ConvertToChainSecuredAccount: Post "/convert_to_chain_secured_account", ApiKey, Json, ConvertRequest => ConvertResponse;
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn every_endpoint_is_listed_once() {
        let mut seen = HashSet::new();
        for (method, path) in ALL {
            assert!(path.starts_with('/') && !path.ends_with('/'), "{path}");
            assert!(
                seen.insert((method, path)),
                "{} {path} twice",
                method.as_str()
            );
        }
        assert!(ALL.contains(&(AddGroup::METHOD, "/add_group")));
        assert!(ALL.contains(&(Method::Get, "/create_wallet")));
        assert!(ALL.contains(&(Method::Post, "/create_wallet")));
    }

    /// What an endpoint's `Input` implies about its method and request type.
    #[test]
    fn every_input_fits_its_method() {
        struct Check(usize);
        impl Visit for Check {
            fn visit<E: Endpoint>(&mut self) {
                let request = std::any::type_name::<E::Request>();
                let fits = match E::INPUT {
                    Input::None => request == "()",
                    Input::Query => E::METHOD == Method::Get && request != "()",
                    Input::Json => E::METHOD == Method::Post,
                };
                assert!(fits, "{} {}", E::METHOD.as_str(), E::PATH);
                self.0 += 1;
            }
        }
        let mut check = Check(0);
        for_each(&mut check);
        assert_eq!(check.0, ALL.len());
    }
}
