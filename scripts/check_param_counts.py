#!/usr/bin/env python3
"""Print torchvision's trainable parameter counts for the CNNs of soapflow's zoo.

tests/test_models.c hard-codes these numbers: soapflow's models must match them
exactly. This script is for humans re-checking them (CI does not run it); it needs
torchvision (Debian: python3-torchvision; run it with /usr/bin/python3 when another
python3 comes first on PATH). LeNet-5 is not in torchvision; its count is computed
here from the layer sizes.
"""
import torchvision.models as models


def count(model):
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def lenet5():
    # conv 6@5x5 on 1 channel, conv 16@5x5 on 6, fc 400-120-84-10, all with bias
    layers = [(1 * 5 * 5, 6), (6 * 5 * 5, 16), (400, 120), (120, 84), (84, 10)]
    return sum(fan_in * out + out for fan_in, out in layers)


def main():
    print(f"{'lenet5':<14}{lenet5():>12,}")
    for name in ["alexnet", "vgg16", "resnet18", "resnet50", "resnet101"]:
        print(f"{name:<14}{count(getattr(models, name)()):>12,}")
    # without the auxiliary classifier; init_weights=False skips the slow scipy init
    m = models.inception_v3(aux_logits=False, init_weights=False)
    print(f"{'inception_v3':<14}{count(m):>12,}")


if __name__ == "__main__":
    main()
