"""The features image (Kafka's FeaturesImage and MetadataVersion): the feature names and levels
minikraft supports, and the finalized levels a node reading an image advertises (ApiVersions,
`kafka-features describe`). Deciding an UpdateFeatures is the controller's
(controller/core/feature_control.py)."""

from __future__ import annotations

from collections.abc import Mapping

from kafkawire.api_versions import ApiFeatures
from metadata.metadata_image import MetadataImage

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
ELR_VERSION = "eligible.leader.replicas.version"
# Kafka 4.4's MetadataVersion.LATEST_PRODUCTION (4.4-IV2): the one metadata format minikraft has.
METADATA_VERSION_LEVEL = 33
KRAFT_VERSION_LEVEL = 1  # KIP-853: voters in the log (storage format --standalone and friends)

# The feature ranges this software supports (ApiVersions' SupportedFeatures, and what
# UpdateFeatures accepts), Kafka's names.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (METADATA_VERSION_LEVEL, METADATA_VERSION_LEVEL),
    KRAFT_VERSION: (0, KRAFT_VERSION_LEVEL),
    ELR_VERSION: (0, 1),
}


def finalized_levels(image: MetadataImage) -> dict[str, int]:
    """The finalized features clients see (ApiVersions' FinalizedFeatures): every level above 0
    in the image, metadata.version and the quorum's kraft.version."""
    levels = {name: level for name, level in image.features.items() if level > 0}
    levels.setdefault(METADATA_VERSION, METADATA_VERSION_LEVEL)
    levels[KRAFT_VERSION] = KRAFT_VERSION_LEVEL
    return levels


def api_features(image: MetadataImage) -> ApiFeatures:
    """ApiVersions' features of a node reading `image` (brokers and controllers alike); the
    epoch is the image's offset, as Kafka's FinalizedFeaturesEpoch is its metadata offset."""
    return ApiFeatures(
        supported=SUPPORTED_FEATURES, finalized=finalized_levels(image), epoch=image.offset
    )
