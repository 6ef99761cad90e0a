//! The top of the OpenAPI 3.1 document; paths are added by the router as it mounts them.

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Confidential-VM key appliance",
        description = "Accounts, usage API keys, groups, wallets (PKPs), actions, billing and attestation. \
Every non-2xx response has the body `{\"error\":{\"code\",\"reason\",\"description\"}}`. \
Every response carries `X-Request-Id`; a client's non-empty `X-Correlation-Id` is echoed.",
        license(name = "Apache-2.0")
    ),
    modifiers(&SecuritySchemes),
    tags(
        (name = "accounts", description = "API-mode accounts"),
        (name = "usage keys", description = "Scoped, rotatable keys managed by the account key"),
        (name = "wallets", description = "Wallets (PKPs) whose keys live only in keyservice"),
        (name = "groups", description = "Groups binding wallets and actions"),
        (name = "actions", description = "Actions registered by IPFS CID"),
        (name = "execution", description = "Running actions"),
        (name = "billing", description = "Prepaid credit: Stripe payments, balance and prices"),
        (name = "wallet signatures", description = "EIP-712 wallet signatures: minting for wallet owners, conversion to ChainSecured"),
        (name = "system", description = "Health and version"),
        (name = "attestation", description = "Quotes, deployment identity and the evidence binding the TLS certificate to them (no auth)"),
    )
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The account key or a usage key. Wins over X-Api-Key."))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-Api-Key"))),
        );
        components.add_security_scheme(
            "wallet_auth",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Wallet-Auth",
                "ChainSecured accounts: standard base64 of {\"typed_data\",\"signature\"}, a BillingAuth EIP-712 signature by the admin wallet",
            ))),
        );
    }
}
