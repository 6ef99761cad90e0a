//! Typed calls: [`Client::call`] for any [`Endpoint`], and one named method per
//! `/core/v1` endpoint, all on the request and response types the server itself
//! serializes (the `appliance-api` crate), so the client cannot drift from the server.
//!
//! How an endpoint's description turns into a request:
//! * [`Input::Json`]: the request is the JSON body; [`Input::Query`]: the query string;
//!   [`Input::None`]: nothing (the named method takes no request);
//! * [`Auth::ApiKey`] and [`Auth::ApiKeyOrWalletAuth`]: the configured API key (a call
//!   without one fails with [`ClientError::NoApiKey`] before anything is sent);
//!   [`Auth::OptionalApiKey`]: the key if one is configured; [`Auth::None`] and
//!   [`Auth::BodySignature`] (the body carries a wallet signature): no key, ever.

use appliance_api::endpoints::{self as ep, Auth, Endpoint, Input, PREFIX};
use http::Method;

use crate::client::{Client, Credential, erased};
use crate::error::ClientError;

impl Client {
    /// Calls endpoint `E` with `request` and decodes its answer (any non-2xx answer is a
    /// typed [`ClientError`], the server's `{code, reason, description}` in
    /// [`ClientError::Api`]). Verifies the deployment first if no verification is in
    /// force.
    pub async fn call<E: Endpoint>(&self, request: &E::Request) -> Result<E::Response, ClientError>
    where
        E::Request: Sync,
    {
        let method = match E::METHOD {
            ep::Method::Get => Method::GET,
            ep::Method::Post => Method::POST,
        };
        let credential = match E::AUTH {
            Auth::None | Auth::BodySignature => Credential::None,
            Auth::OptionalApiKey if !self.has_api_key() => Credential::None,
            Auth::OptionalApiKey | Auth::ApiKey | Auth::ApiKeyOrWalletAuth => Credential::ApiKey,
        };
        let path = format!("{PREFIX}{}", E::PATH);
        match E::INPUT {
            Input::None => self.request(method, &path, None, None, credential).await,
            Input::Query => {
                let query: &(dyn erased::Query + Sync) = request;
                self.request(method, &path, Some(query), None, credential)
                    .await
            }
            Input::Json => {
                let body =
                    serde_json::to_vec(request).map_err(|e| ClientError::Config(e.to_string()))?;
                self.request(method, &path, None, Some(body), credential)
                    .await
            }
        }
    }
}

/// One `impl Client` method per endpoint, and [`METHODS`] from the same list.
/// `name(request) => Endpoint` takes the endpoint's request; `name() => Endpoint` is for
/// an endpoint whose request is `()`.
macro_rules! typed_methods {
    ($( $name:ident($($request:ident)?) => $endpoint:ident; )*) => {
        impl Client {
            $(
                #[doc = concat!(
                    "Calls [`", stringify!($endpoint), "`](appliance_api::endpoints::",
                    stringify!($endpoint), ") (see [`Client::call`])."
                )]
                pub async fn $name(
                    &self,
                    $($request: &<ep::$endpoint as Endpoint>::Request,)?
                ) -> Result<<ep::$endpoint as Endpoint>::Response, ClientError> {
                    self.call::<ep::$endpoint>(typed_methods!(@request $($request)?)).await
                }
            )*
        }

        /// Every named method: `(method name, HTTP method, path under /core/v1)`, in the
        /// order of [`appliance_api::endpoints::ALL`].
        pub const METHODS: &[(&str, ep::Method, &str)] = &[
            $((stringify!($name), <ep::$endpoint as Endpoint>::METHOD, <ep::$endpoint as Endpoint>::PATH)),*
        ];
    };
    (@request $request:ident) => { $request };
    (@request) => { &() };
}

typed_methods! {
    new_account(request) => NewAccount;
    account_exists() => AccountExists;

    add_usage_api_key(request) => AddUsageApiKey;
    list_api_keys(request) => ListApiKeys;
    update_usage_api_key(request) => UpdateUsageApiKey;
    update_usage_api_key_metadata(request) => UpdateUsageApiKeyMetadata;
    remove_usage_api_key(request) => RemoveUsageApiKey;

    create_wallet(request) => CreateWallet;
    create_wallet_unnamed() => CreateWalletGet;
    list_wallets(request) => ListWallets;
    list_wallets_in_group(request) => ListWalletsInGroup;

    add_group(request) => AddGroup;
    list_groups(request) => ListGroups;
    update_group(request) => UpdateGroup;
    remove_group(request) => RemoveGroup;
    add_pkp_to_group(request) => AddPkpToGroup;
    remove_pkp_from_group(request) => RemovePkpFromGroup;
    add_action_to_group(request) => AddActionToGroup;
    remove_action_from_group(request) => RemoveActionFromGroup;

    add_action(request) => AddAction;
    delete_action(request) => DeleteAction;
    update_action_metadata(request) => UpdateActionMetadata;
    list_actions(request) => ListActions;
    get_lit_action_ipfs_id(request) => GetLitActionIpfsId;

    lit_action(request) => LitAction;
    get_lit_action_client_config() => GetLitActionClientConfig;

    get_node_chain_config() => GetNodeChainConfig;
    get_api_payers() => GetApiPayers;
    get_admin_api_payer() => GetAdminApiPayer;

    stripe_config() => StripeConfig;
    balance() => Balance;
    usage(request) => Usage;
    create_payment_intent(request) => CreatePaymentIntent;
    confirm_payment(request) => ConfirmPayment;
    prices() => Prices;

    create_wallet_with_signature(request) => CreateWalletWithSignature;
    add_usage_api_key_with_signature(request) => AddUsageApiKeyWithSignature;
    convert_to_chain_secured_account(request) => ConvertToChainSecuredAccount;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new endpoint in `appliance-api` without a named method here fails this test.
    #[test]
    fn there_is_one_named_method_per_endpoint_in_order() {
        let methods: Vec<(ep::Method, &str)> = METHODS.iter().map(|(_, m, p)| (*m, *p)).collect();
        assert_eq!(methods, ep::ALL.to_vec());
        let mut names: Vec<&str> = METHODS.iter().map(|(n, _, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len(), "a method name is used twice");
    }

    /// A method's name is its path's last segment (the one GET/POST pair aside).
    #[test]
    fn a_methods_name_says_its_path() {
        for (name, method, path) in METHODS {
            let last = path.rsplit('/').next().unwrap_or_default();
            let expected = match (*method, *path) {
                (ep::Method::Get, "/create_wallet") => "create_wallet_unnamed",
                _ => last,
            };
            assert_eq!(*name, expected, "{} {path}", method.as_str());
        }
    }
}
