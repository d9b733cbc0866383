"""Finalized features (controller/core/feature_control): bootstrap records, UpdateFeatures'
checks in Kafka's FeatureControlManager order and messages, the ELR safety records, and a
level-0 ELR staying off through replay and snapshot."""

from __future__ import annotations

from controller.core import feature_control as fc
from controller.core.config_control import elr_enabled
from kafkawire import admin_messages as am
from kafkawire.errors import Errors
from metadata import features
from metadata.image_records import image_records
from metadata.metadata_image import MetadataDelta, MetadataImage
from metadata.records import CONFIG_RESOURCE_BROKER, ConfigRecord, FeatureLevelRecord


def replayed(*records: object, base: MetadataImage | None = None) -> MetadataImage:
    delta = MetadataDelta(base)
    for offset, record in enumerate(records):
        delta.replay(record, offset)  # type: ignore[arg-type]
    return delta.image()


def update(image: MetadataImage, *updates: am.FeatureUpdate, validate_only: bool = False,
           ) -> tuple[tuple[object, ...], am.UpdateFeaturesResponse]:
    result = fc.update_features(
        image, am.update_features_request(updates, validate_only), node_id=1, static_min_isr=2
    )
    return result.records, result.response


def test_bootstrap_writes_metadata_version_elr_and_the_cluster_min_isr_once() -> None:
    records = fc.bootstrap_records(MetadataImage(), elr_enabled=True, static_min_isr=2)
    assert records == (
        FeatureLevelRecord(fc.METADATA_VERSION, fc.METADATA_VERSION_LEVEL),
        FeatureLevelRecord(fc.ELR_VERSION, 1),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "2"),
    )
    image = replayed(*records)
    assert fc.bootstrap_records(image, elr_enabled=True, static_min_isr=2) == ()
    assert features.finalized_levels(image) == {
        fc.METADATA_VERSION: fc.METADATA_VERSION_LEVEL, fc.KRAFT_VERSION: 1, fc.ELR_VERSION: 1}
    off = fc.bootstrap_records(MetadataImage(), elr_enabled=False, static_min_isr=2)
    assert off[1:] == (FeatureLevelRecord(fc.ELR_VERSION, 0),)
    assert not elr_enabled(replayed(*off), default=True)


def test_downgrade_to_zero_stays_off_through_a_snapshot() -> None:
    image = replayed(*fc.bootstrap_records(MetadataImage(), True, 1))
    records, response = update(image, am.feature_update(fc.ELR_VERSION, 0, am.SAFE_DOWNGRADE))
    assert response.error_code == Errors.NONE
    assert records == (FeatureLevelRecord(fc.ELR_VERSION, 0),)  # no config records
    off = replayed(*records, base=image)
    assert not elr_enabled(off, default=True)
    assert fc.ELR_VERSION not in features.finalized_levels(off)  # ApiVersions lists levels above 0
    assert not elr_enabled(replayed(*image_records(off)), default=True)


def test_upgrade_writes_the_elr_safety_records_first() -> None:
    image = replayed(
        FeatureLevelRecord(fc.METADATA_VERSION, fc.METADATA_VERSION_LEVEL),
        FeatureLevelRecord(fc.ELR_VERSION, 0),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "7", "min.insync.replicas", "3"),
    )
    records, response = update(image, am.feature_update(fc.ELR_VERSION, 1))
    assert response.error_code == Errors.NONE
    assert records == (
        ConfigRecord(CONFIG_RESOURCE_BROKER, "", "min.insync.replicas", "2"),
        ConfigRecord(CONFIG_RESOURCE_BROKER, "7", "min.insync.replicas", None),
        FeatureLevelRecord(fc.ELR_VERSION, 1),
    )
    assert update(image, am.feature_update(fc.ELR_VERSION, 1), validate_only=True)[0] == ()


def test_refusals_carry_kafkas_messages_and_write_nothing() -> None:
    image = replayed(*fc.bootstrap_records(MetadataImage(), True, 1))
    cases = [
        (am.feature_update(fc.ELR_VERSION, 2),
         "Invalid update version 2 for feature eligible.leader.replicas.version. "
         "Local controller 1 only supports versions 0-1"),
        (am.feature_update(fc.ELR_VERSION, 0),
         "Can't downgrade the version of this feature without setting the upgrade type"),
        (am.feature_update(fc.ELR_VERSION, 1, am.SAFE_DOWNGRADE), None),  # same level: allowed
        (am.feature_update("group.version", 1), "Local controller 1 does not support this feature."),
        (am.feature_update(fc.METADATA_VERSION, 30, am.SAFE_DOWNGRADE),
         "only supports versions 33-33"),
        (am.feature_update(fc.KRAFT_VERSION, 0, am.SAFE_DOWNGRADE), "always kraft.version 1"),
        (am.feature_update(fc.ELR_VERSION, -1, am.SAFE_DOWNGRADE), "cannot be less than 0"),
        (am.feature_update(fc.ELR_VERSION, 1, 9), "does not support the given upgrade type"),
    ]
    for feature_update, message in cases:
        records, response = update(image, feature_update)
        if message is None:
            assert response.error_code == Errors.NONE
            continue
        assert response.error_code == Errors.INVALID_UPDATE_VERSION, feature_update
        assert message in (response.error_message or ""), response.error_message
        assert records == ()
    # One bad update refuses the whole request (Kafka answers one error for all).
    records, response = update(image, am.feature_update(fc.ELR_VERSION, 0, am.SAFE_DOWNGRADE),
                               am.feature_update("share.version", 1))
    assert response.error_code == Errors.INVALID_UPDATE_VERSION and records == ()
