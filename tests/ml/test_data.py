import pickle

import numpy as np
import pytest
import torch
from PIL import Image

from gclab.errors import ConfigError
from gclab.ml.data import CIFAR10Data, ImageFolderData, SyntheticData


def write_cifar_pickles(root, per_batch=20):
    """A tiny dataset in the layout of torchvision's cifar-10-batches-py (other MD5s)."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        batch = {
            "data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
            "labels": rng.integers(0, 10, per_batch).tolist(),
        }
        (folder / name).write_bytes(pickle.dumps(batch))
    meta = {"label_names": [f"c{i}" for i in range(10)]}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    return folder


def test_cifar_pickle_layout_loads_without_md5_when_verify_is_off(tmp_path):
    folder = write_cifar_pickles(tmp_path)
    data = CIFAR10Data(str(tmp_path), download=False, verify=False).load()
    assert data.train_x.shape == (100, 3, 32, 32) and data.train_x.dtype == torch.uint8
    assert data.test_x.shape == (20, 3, 32, 32) and data.num_classes == 10
    raw = pickle.loads((folder / "data_batch_1").read_bytes())
    assert np.array_equal(data.train_x[0].numpy().reshape(-1), raw["data"][0])
    assert data.train_y[:20].tolist() == raw["labels"]


def test_cifar_verified_load_of_a_non_official_copy_says_where_to_put_data(tmp_path):
    write_cifar_pickles(tmp_path)  # MD5 sums differ from the release: torchvision refuses
    with pytest.raises(ConfigError, match=r"^root=.*image_folder.*synthetic"):
        CIFAR10Data(str(tmp_path), download=False).load()


def test_unpickler_refuses_code_in_a_data_file(tmp_path):
    folder = write_cifar_pickles(tmp_path)
    (folder / "data_batch_1").write_bytes(pickle.dumps({"data": print, "labels": []}))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        CIFAR10Data(str(tmp_path), verify=False).load()


def write_image_tree(root, per_class=3, classes=("cat", "dog")):
    rng = np.random.default_rng(1)
    for split in ("train", "test"):
        for c in classes:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class):
                img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                Image.fromarray(img).save(root / split / c / f"{i}.png")


def test_image_folder_loads_and_caches_decoded_tensors(tmp_path):
    write_image_tree(tmp_path)
    data = ImageFolderData(str(tmp_path)).load()
    assert data.train_x.shape == (6, 3, 32, 32) and data.num_classes == 2
    assert data.train_y.tolist() == [0, 0, 0, 1, 1, 1]
    assert len(list(tmp_path.glob(".gclab-cache-*.npz"))) == 2
    again = ImageFolderData(str(tmp_path)).load()  # from the cache
    assert torch.equal(again.train_x, data.train_x)
    first = np.asarray(Image.open(tmp_path / "train" / "cat" / "0.png"))
    assert np.array_equal(data.train_x[0].permute(1, 2, 0).numpy(), first)


def test_image_folder_without_train_test_is_rejected_with_the_expected_layout(tmp_path):
    with pytest.raises(ConfigError, match=r"no train or test/ folder.*root/train/<class>"):
        ImageFolderData(str(tmp_path))


def test_synthetic_is_seeded_and_learnable_shaped():
    a, b = SyntheticData(64, 16, seed=3).load(), SyntheticData(64, 16, seed=3).load()
    assert torch.equal(a.train_x, b.train_x) and a.train_x.shape == (64, 3, 32, 32)
    assert not torch.equal(a.train_x, SyntheticData(64, 16, seed=4).load().train_x)
    with pytest.raises(ConfigError, match="train_size=0"):
        SyntheticData(train_size=0)


CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer",
                 "dog", "frog", "horse", "ship", "truck"]  # fmt: skip


def write_cifar_jpeg_tree(root, counts=(("train", 4), ("test", 2))):
    """A small tree in the shared copy's layout (``<split>/<class>/NNNN.jpg``, 32x32 JPEG)."""
    rng = np.random.default_rng(2)
    for split, per_class in counts:
        for c in CIFAR_CLASSES:
            (root / split / c).mkdir(parents=True)
            for i in range(per_class):
                img = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
                Image.fromarray(img).save(root / split / c / f"{i:04d}.jpg", quality=90)


def test_cifar_shaped_jpeg_tree_loads_as_an_image_folder(tmp_path):
    """The shared copy's layout and format, generated: 10 classes of 3x32x32 JPEGs."""
    write_cifar_jpeg_tree(tmp_path)
    data = ImageFolderData(str(tmp_path)).load()
    assert data.train_x.shape == (40, 3, 32, 32) and data.test_x.shape == (20, 3, 32, 32)
    assert data.num_classes == 10 and torch.bincount(data.train_y).tolist() == [4] * 10
    decoded = np.asarray(Image.open(tmp_path / "train" / "airplane" / "0000.jpg"))
    assert np.array_equal(data.train_x[0].permute(1, 2, 0).numpy(), decoded)
    again = ImageFolderData(str(tmp_path)).load()  # from the .npz cache beside the data
    assert torch.equal(again.test_x, data.test_x)


@pytest.mark.slow
@pytest.mark.no_ray
@pytest.mark.shared
def test_shared_cifar10_loads_as_an_image_folder(shared_cifar):
    """The real dataset (shared JPEG copy): 50k/10k images, 10 classes, cached decode."""
    data = ImageFolderData(str(shared_cifar)).load()
    assert data.train_x.shape == (50000, 3, 32, 32) and data.test_x.shape == (10000, 3, 32, 32)
    assert data.num_classes == 10 and torch.bincount(data.train_y).tolist() == [5000] * 10
    again = ImageFolderData(str(shared_cifar)).load()  # from the .npz cache beside the data
    assert torch.equal(again.test_x, data.test_x)
