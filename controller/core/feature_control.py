"""Finalized features (Kafka's FeatureControlManager): which feature levels minikraft supports,
which are finalized in the metadata image, UpdateFeatures, and the bootstrap feature records an
empty metadata log gets on its first activation.

`eligible.leader.replicas.version` is the switch for KIP-966's ELR (rule 10): level 1 on, 0 off,
as Kafka 4.x (EligibleLeaderReplicasVersion). Enabling it also writes what Kafka's
ConfigurationControlManager.maybeGenerateElrSafetyRecords writes: a cluster-level
min.insync.replicas when there is none (the active controller's static value), and the removal
of every broker-level min.insync.replicas (rule 15: ELR reads the cluster-level value only).
Turning it off writes only the FeatureLevelRecord: ELR and LastKnownELR written while it was on
are wiped by the next change of each partition (rule 10), as Kafka's PartitionChangeBuilder does.

minikraft implements one metadata.version, Kafka 4.4's, and KIP-853's dynamic quorum only
(kraft.version 1): other levels of those are refused with Kafka's INVALID_UPDATE_VERSION.
"""

from __future__ import annotations

from controller.core.controller_result import ControllerResult
from kafkawire.admin_messages import (
    SAFE_DOWNGRADE,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
    update_features_response,
)
from kafkawire.errors import Errors
from metadata.features import (
    ELR_VERSION,
    KRAFT_VERSION,
    METADATA_VERSION,
    METADATA_VERSION_LEVEL,
    SUPPORTED_FEATURES,
    finalized_levels,
)
from metadata.metadata_image import (
    CLUSTER_DEFAULT_RESOURCE,
    MIN_INSYNC_REPLICAS,
    MetadataImage,
)
from metadata.records import (
    CONFIG_RESOURCE_BROKER,
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
)


def bootstrap_records(
    image: MetadataImage, elr_enabled: bool, static_min_isr: int
) -> tuple[MetadataRecord, ...]:
    """What a new cluster's first active controller writes (Kafka's bootstrap metadata, from
    `storage format`): metadata.version, the ELR level (minikraft's
    `eligible.leader.replicas.enabled`, default on, Kafka 4.1+'s default too) and, with ELR on,
    the cluster-level min.insync.replicas. Nothing once metadata.version is in the image."""
    if METADATA_VERSION in image.features:
        return ()
    records: list[MetadataRecord] = [FeatureLevelRecord(METADATA_VERSION, METADATA_VERSION_LEVEL)]
    if ELR_VERSION not in image.features:
        records.append(FeatureLevelRecord(ELR_VERSION, 1 if elr_enabled else 0))
        if elr_enabled:
            records.extend(elr_safety_records(image, static_min_isr))
    return tuple(records)


def elr_safety_records(image: MetadataImage, static_min_isr: int) -> list[MetadataRecord]:
    """Kafka's maybeGenerateElrSafetyRecords: a cluster-level min.insync.replicas when there is
    none, and no broker-level one (rule 15)."""
    records: list[MetadataRecord] = []
    cluster = image.configs.get((CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE), {})
    if MIN_INSYNC_REPLICAS not in cluster:
        records.append(ConfigRecord(CONFIG_RESOURCE_BROKER, CLUSTER_DEFAULT_RESOURCE,
                                    MIN_INSYNC_REPLICAS, str(static_min_isr)))
    for (resource_type, name), configs in sorted(image.configs.items()):
        if (resource_type == CONFIG_RESOURCE_BROKER and name != CLUSTER_DEFAULT_RESOURCE
                and MIN_INSYNC_REPLICAS in configs):
            records.append(ConfigRecord(CONFIG_RESOURCE_BROKER, name, MIN_INSYNC_REPLICAS, None))
    return records


def update_features(
    image: MetadataImage, request: UpdateFeaturesRequest, node_id: int, static_min_isr: int
) -> ControllerResult[UpdateFeaturesResponse]:
    """UpdateFeatures on the active controller: all updates are written or none (Kafka answers
    the first failing feature's INVALID_UPDATE_VERSION for the whole request)."""
    records: list[MetadataRecord] = []
    seen: set[str] = set()
    for update in request.feature_updates:
        if update.feature in seen:
            return _refused(Errors.INVALID_REQUEST,
                            f"Feature {update.feature} was specified more than once.")
        seen.add(update.feature)
        reason = _reason_refused(image, update, node_id)
        if reason is not None:
            return _refused(
                Errors.INVALID_UPDATE_VERSION,
                f"Invalid update version {update.max_version_level} for feature "
                f"{update.feature}. {reason}",
            )
        if update.feature != KRAFT_VERSION:  # the quorum's own record, never a metadata one
            records.append(FeatureLevelRecord(update.feature, int(update.max_version_level)))
    if request.validate_only:
        return ControllerResult((), update_features_response())
    if any(u.feature == ELR_VERSION and u.max_version_level > 0 for u in request.feature_updates):
        records[:0] = elr_safety_records(image, static_min_isr)
    return ControllerResult(tuple(records), update_features_response())


def _refused(error: Errors, message: str) -> ControllerResult[UpdateFeaturesResponse]:
    return ControllerResult((), update_features_response(error, message))


def _reason_refused(image: MetadataImage, update: FeatureUpdate, node_id: int) -> str | None:
    """Kafka's FeatureControlManager.updateFeature checks, in its order."""
    if update.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return "The controller does not support the given upgrade type."
    level = update.max_version_level
    current = finalized_levels(image).get(update.feature, 0)
    if level < 0:
        return "A feature version cannot be less than 0."
    low, high = SUPPORTED_FEATURES.get(update.feature, (0, 0))
    if not low <= level <= high:
        if high == 0:
            return f"Local controller {node_id} does not support this feature."
        return f"Local controller {node_id} only supports versions {low}-{high}"
    if level < current and update.upgrade_type == UPGRADE:
        return ("Can't downgrade the version of this feature without setting the upgrade type "
                "to either safe or unsafe downgrade.")
    if level > current and update.upgrade_type != UPGRADE:
        return "Can't downgrade to a newer version."
    if update.feature == KRAFT_VERSION and level != current:
        return "minikraft's quorum is always kraft.version 1 (KIP-853 voters in the log)."
    return None
