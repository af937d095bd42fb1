//! `kube::Resource` for the slim types the runtime decodes other controllers' namespaced objects into (CAPI's
//! Machines and Clusters, IPAM's claims and addresses): their group, version, kind and plural, and their metadata.

/// Implements `kube::Resource` for a namespaced slim type with a `metadata: ObjectMeta` field.
macro_rules! namespaced_resource {
    ($type:ty, $group:expr, $version:expr, $kind:literal, $plural:literal) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = k8s_openapi::NamespaceResourceScope;

            fn kind(_: &()) -> std::borrow::Cow<'_, str> {
                $kind.into()
            }

            fn group(_: &()) -> std::borrow::Cow<'_, str> {
                $group.into()
            }

            fn version(_: &()) -> std::borrow::Cow<'_, str> {
                $version.into()
            }

            fn plural(_: &()) -> std::borrow::Cow<'_, str> {
                $plural.into()
            }

            fn meta(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &self.metadata
            }

            fn meta_mut(&mut self) -> &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

pub(crate) use namespaced_resource;
