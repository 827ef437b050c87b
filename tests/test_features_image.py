"""Image backbones with random weights on small generated images: shapes, seeding, weight files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torchvision")
pytest.importorskip("timm")
PIL_Image = pytest.importorskip("PIL.Image")

from lsnpc.features import ImageEncoder, load_image, make_encoder, preprocess_images  # noqa: E402
from lsnpc._torch import num_threads as torch_threads  # noqa: E402

# One torch thread per forward: on a busy shared machine this is several times faster than two.
ONE = 1


def _images(n: int, seed: int = 0, size: tuple[int, int] = (48, 64)) -> list:
    rng = np.random.default_rng(seed)
    return [
        PIL_Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8)) for _ in range(n)
    ]


@pytest.fixture(scope="module")
def levit_small() -> ImageEncoder:
    """LeViT-128s (the smallest LeViT, 384-d) with random weights, network loaded once."""
    encoder = ImageEncoder("levit_128s", weights=None, seed=1, num_threads=ONE)
    encoder.model  # noqa: B018 - build now so the tests below share it
    return encoder


def test_resnet50_spatial_map_is_2048x7x7_at_224():
    encoder = ImageEncoder("resnet50", weights=None, output="spatial", num_threads=ONE)
    maps = encoder.encode(_images(1), batch_size=1)
    assert maps.shape == (1, 2048, 7, 7) == (1, *encoder.output_shape)
    assert maps.dtype == np.float32 and np.isfinite(maps).all()


def test_resnet50_pooled_vector_is_the_average_of_its_map_at_any_size():
    encoder = ImageEncoder("resnet50", weights=None, output="spatial", image_size=70, num_threads=ONE)
    maps = encoder.encode(_images(2), batch_size=2)
    assert maps.shape == (2, *encoder.output_shape) == (2, 2048, 3, 3)
    pooled_encoder = encoder.with_output("pooled")  # shares the loaded network
    pooled = pooled_encoder.encode(_images(2), batch_size=2)
    assert pooled.shape == (2, 2048) and pooled_encoder.dim == 2048
    np.testing.assert_allclose(pooled, maps.mean(axis=(2, 3)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backbone, dim", [("levit_192", 384)])
def test_levit_pooled_and_spatial_shapes_at_its_fixed_size(backbone, dim):
    pooled_encoder = ImageEncoder(backbone, weights=None, num_threads=ONE)
    assert pooled_encoder.image_size == 224
    pooled = pooled_encoder.encode(_images(2), batch_size=2)
    assert pooled.shape == (2, dim)
    spatial_encoder = pooled_encoder.with_output("spatial")
    maps = spatial_encoder.encode(_images(2), batch_size=2)
    assert maps.shape == (2, dim, 4, 4) == (2, *spatial_encoder.output_shape)
    # the 16 final tokens averaged are the pooled vector
    np.testing.assert_allclose(pooled, maps.mean(axis=(2, 3)), rtol=1e-4, atol=1e-5)
    # two different images give two different vectors
    assert not np.allclose(pooled[0], pooled[1])


def test_levit_rejects_another_input_size():
    with pytest.raises(ValueError, match="fixed input size 224"):
        ImageEncoder("levit_192", weights=None, image_size=256)


def test_batching_and_image_paths_give_the_same_result_as_one_batch(levit_small, tmp_path):
    images = _images(3, seed=2)
    paths = []
    for i, img in enumerate(images):
        paths.append(tmp_path / f"img{i}.png")  # PNG is lossless: pixels survive the round trip
        img.save(paths[-1])
    whole = levit_small.encode(images, batch_size=3)
    in_pieces = levit_small.encode([str(p) for p in paths], batch_size=2)
    np.testing.assert_allclose(whole, in_pieces, rtol=1e-4, atol=1e-5)


def test_random_init_is_seeded_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    a = ImageEncoder("levit_128s", weights=None, seed=3).model.state_dict()
    b = ImageEncoder("levit_128s", weights=None, seed=3).model.state_dict()
    c = ImageEncoder("levit_128s", weights=None, seed=4).model.state_dict()
    assert torch.equal(torch.random.get_rng_state(), state)
    key = "stem.conv1.linear.weight"
    assert torch.equal(a[key], b[key]) and not torch.equal(a[key], c[key])
    assert ImageEncoder("levit_128s", weights=None, seed=3).weights_id == "random-seed3"


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_weights_from_a_local_file_reproduce_the_saved_network(levit_small, tmp_path, suffix):
    path = tmp_path / f"levit{suffix}"
    state = {k: v.contiguous() for k, v in levit_small.model.state_dict().items()}
    if suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file(state, str(path))
    else:
        torch.save({"state_dict": state}, path)  # a wrapped checkpoint is unwrapped
    loaded = ImageEncoder("levit_128s", weights=str(path), seed=99, num_threads=ONE)
    images = _images(2, seed=5)
    np.testing.assert_array_equal(levit_small.encode(images), loaded.encode(images))
    assert loaded.weights_id.startswith("sha256-")
    assert loaded.weights_id != levit_small.weights_id


def test_a_different_classifier_head_in_the_file_is_ignored(tmp_path):
    import timm
    from safetensors.torch import save_file

    finetuned = timm.create_model("levit_128s", num_classes=20)  # e.g. a VOC head
    path = tmp_path / "finetuned.safetensors"
    save_file({k: v.contiguous() for k, v in finetuned.state_dict().items()}, str(path))
    encoder = ImageEncoder("levit_128s", weights=path)
    trunk_key = "stem.conv1.linear.weight"
    assert torch.equal(encoder.model.state_dict()[trunk_key], finetuned.state_dict()[trunk_key])


def test_weights_of_another_architecture_are_refused(levit_small, tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "wrong.safetensors"
    save_file({k: v.contiguous() for k, v in levit_small.model.state_dict().items()}, str(path))
    with pytest.raises(ValueError, match="do not fit levit_192"):
        ImageEncoder("levit_192", weights=path).model  # noqa: B018


def test_bad_weights_arguments_are_named():
    with pytest.raises(ValueError, match="neither a weights file nor a known name"):
        ImageEncoder("resnet50", weights="imagenet21k")
    with pytest.raises(FileNotFoundError, match="weights file not found"):
        ImageEncoder("resnet50", weights="/nonexistent/w.pth").model  # noqa: B018
    with pytest.raises(ValueError, match="backbone"):
        ImageEncoder("vgg16", weights=None)
    with pytest.raises(ValueError, match="output"):
        ImageEncoder("resnet50", weights=None, output="tokens")


def test_registered_imagenet_weights_have_a_content_id_without_downloading():
    v1 = ImageEncoder("resnet50")  # nothing is fetched until the network is used
    assert v1.weights_id == "IMAGENET1K_V1-0676ba61b679"
    assert ImageEncoder("resnet50", weights="IMAGENET1K_V2").weights_id.startswith("IMAGENET1K_V2-11ad3fa6")


def test_preprocessing_warps_to_the_square_size_and_normalises():
    white = PIL_Image.new("RGB", (50, 30), (255, 255, 255))
    assert load_image(white, 32).shape == (32, 32, 3)
    x = preprocess_images([white], 32)
    assert x.shape == (1, 3, 32, 32)
    expected = (1 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(x[0, :, 0, 0].numpy(), expected, rtol=1e-5)
    with pytest.raises(ValueError, match="file paths or PIL images"):
        load_image(np.zeros((4, 4, 3)), 32)


def test_make_encoder_picks_the_modality_by_name():
    assert isinstance(make_encoder("levit_128s", weights=None), ImageEncoder)
    assert make_encoder("resnet50", weights=None, output="spatial").output == "spatial"


def test_thread_count_is_restored_after_encoding(levit_small):
    before = torch.get_num_threads()
    levit_small.encode(_images(1))
    with torch_threads(1):
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


def test_integer_arguments_accept_numpy_ints_and_refuse_bad_values(levit_small):
    assert ImageEncoder("resnet50", weights=None, image_size=np.int64(96)).image_size == 96
    assert levit_small.encode(_images(1), batch_size=np.int32(1)).shape == (1, 384)
    with pytest.raises(ValueError, match="batch_size"):
        levit_small.encode(_images(1), batch_size=0)
    with pytest.raises(ValueError, match="seed"):
        ImageEncoder("resnet50", weights=None, seed=-1)
