from barca import asset


def clean(x: int) -> int:
    return x + 1


def unused(x: int) -> int:
    return x * 2


SCALE = 10


@asset()
def base() -> int:
    return clean(1) * SCALE


@asset(inputs={"b": base})
def top(b: int) -> int:
    return b + 1
