//! `import`: ES modules for actions, loaded through the parent.
//!
//! An action whose code is not a valid classic script but is a valid module (it has
//! `import` or `export` declarations, or top-level `await`) runs as a module, in the same
//! realm and under the same limits as a script would: its imported modules are parsed and
//! evaluated in the job's context, so their memory, their time and their recursion count
//! against the job's own. `main` is whatever a top-level `main` binding of the module holds
//! at the end of its evaluation: one appended statement copies it to a hidden property of
//! the module's `import.meta`, which the runtime keeps for the job. (Not a hidden export:
//! reading it would need the module's namespace object, which boa 0.22 never frees: its
//! cache of resolved bindings holds the module graph without tracing it, a root cycle
//! that keeps the job's whole realm alive. Actions that use `import * as ns` or `import()`
//! still create namespaces; those leaks are bounded by the worker's retirement on its
//! heap.)
//!
//! Every `import` (static, or `import()` from a script or a module) is one `import` host
//! call: the worker sends the specifier as written and the URL of the importing module
//! (none for the action itself); the parent resolves it, fetches and verifies the module,
//! and answers its URL, its SHA-384 and its source. The worker never resolves, fetches or
//! verifies anything itself. Modules are keyed by URL for the rest of the job, so two
//! specifiers naming one URL are one module (one evaluation, one namespace), and the
//! parent sends each URL's source once per job.
//!
//! `import.meta.url` is the module's URL. Import attributes (`with { type: "json" }`)
//! are refused. `Lit.Actions.showImportDetails()` lists the modules loaded so far.

use std::cell::RefCell;
use std::path::Path;
use std::rc::Rc;

use boa_engine::module::{ModuleLoader, ModuleRequest, Referrer};
use boa_engine::object::JsObject;
use boa_engine::object::builtins::JsArray;
use boa_engine::{Context, JsNativeError, JsResult, JsValue, Module, Source, js_string};

use super::state::{self, Loaded};
use crate::protocol::{HostRequest, ImportRequest, ImportedModule};

/// The hidden `import.meta` property through which the runtime finds a module action's
/// `main`.
const MAIN_PROPERTY: &str = "__litActionMain__";

/// The label of the action's own code (its module's path; never a module URL).
pub(crate) const ACTION_PATH: &str = "action.js";

/// The module form of an action's code: its text, then the statement that hands `main`
/// to the runtime (`typeof` reads an undeclared name without throwing).
pub(crate) fn module_text(code: &str) -> String {
    format!(
        "{code}\n;import.meta.{MAIN_PROPERTY} = typeof main === \"function\" ? main : undefined;\n"
    )
}

/// The action module's `main`, as its last statement left it.
pub(crate) fn module_main(ctx: &mut Context) -> JsResult<Option<JsObject>> {
    let meta = state::job(ctx)?.borrow().action_meta.clone();
    let Some(meta) = meta else {
        return Ok(None);
    };
    Ok(meta.get(js_string!(MAIN_PROPERTY), ctx)?.as_callable())
}

/// The context's module loader: every request goes to the parent.
#[derive(Debug, Default)]
pub(crate) struct ParentModules;

impl ModuleLoader for ParentModules {
    fn load_imported_module(
        self: Rc<Self>,
        referrer: Referrer,
        request: ModuleRequest,
        context: &RefCell<&mut Context>,
    ) -> impl Future<Output = JsResult<Module>> {
        let result = load(&referrer, &request, &mut context.borrow_mut());
        async { result }
    }

    fn init_import_meta(
        self: Rc<Self>,
        import_meta: &JsObject,
        module: &Module,
        context: &mut Context,
    ) {
        match module.path().and_then(Path::to_str) {
            Some(ACTION_PATH) => {
                if let Ok(job) = state::job(context) {
                    job.borrow_mut().action_meta = Some(import_meta.clone());
                }
            }
            Some(url) => {
                // A fresh ordinary object: defining a property on it cannot fail.
                let _ = import_meta.create_data_property_or_throw(
                    js_string!("url"),
                    js_string!(url),
                    context,
                );
            }
            None => {}
        }
    }
}

/// One `import`: a host call, then the module of the URL it names (parsed on first use).
fn load(referrer: &Referrer, request: &ModuleRequest, ctx: &mut Context) -> JsResult<Module> {
    let specifier = request.specifier().to_std_string_escaped();
    if !request.attributes().is_empty() {
        return Err(JsNativeError::typ()
            .with_message(format!(
                "import `{specifier}`: import attributes are not supported"
            ))
            .into());
    }
    let job = state::job(ctx)?;
    // Only a module the parent sent has a URL; the action itself (a script or the
    // action's module, whose path is just a label) has none.
    let referrer = referrer
        .path()
        .and_then(Path::to_str)
        .filter(|path| job.borrow().modules.contains_key(*path))
        .map(str::to_owned);
    let reply = state::host_call_json(
        ctx,
        HostRequest::Import(ImportRequest {
            specifier: specifier.clone(),
            referrer,
        }),
    )?;
    let imported: ImportedModule = serde_json::from_value(reply).map_err(|e| {
        JsNativeError::error().with_message(format!("import: malformed reply from the host: {e}"))
    })?;
    if let Some(loaded) = job.borrow().modules.get(&imported.url) {
        return Ok(loaded.module.clone());
    }
    let Some(source) = imported.source else {
        return Err(JsNativeError::error()
            .with_message(format!(
                "import `{specifier}`: the host sent no source for {}",
                imported.url
            ))
            .into());
    };
    let parsed = Module::parse(
        Source::from_bytes(source.as_bytes()).with_path(Path::new(&imported.url)),
        None,
        ctx,
    );
    drop(source);
    let module = parsed.map_err(|e| {
        JsNativeError::syntax().with_message(format!(
            "import `{specifier}`: {} is not a module boa can parse: {e}",
            imported.url
        ))
    })?;
    job.borrow_mut().modules.insert(
        imported.url,
        Loaded {
            module: module.clone(),
            integrity: imported.integrity,
        },
    );
    Ok(module)
}

/// `Lit.Actions.showImportDetails()`: `[{url, hash}]` of the modules loaded so far, in
/// URL order.
pub(crate) fn import_details(ctx: &mut Context) -> JsResult<JsValue> {
    let job = state::job(ctx)?;
    let rows: Vec<(String, String)> = job
        .borrow()
        .modules
        .iter()
        .map(|(url, loaded)| (url.clone(), loaded.integrity.clone()))
        .collect();
    let mut items = Vec::with_capacity(rows.len());
    for (url, hash) in rows {
        let item = JsObject::with_object_proto(ctx.intrinsics());
        item.create_data_property_or_throw(js_string!("url"), js_string!(url.as_str()), ctx)?;
        item.create_data_property_or_throw(js_string!("hash"), js_string!(hash.as_str()), ctx)?;
        items.push(JsValue::from(item));
    }
    Ok(JsArray::from_iter(items, ctx).into())
}
