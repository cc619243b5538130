"""Math prompts: multi-step word problems with seeded numbers, some in LaTeX notation."""

from __future__ import annotations

import random

NAMES = ["Amira", "Ben", "Carla", "Deniz", "Eli", "Farah", "Gus", "Hiro", "Ivy", "Jamal", "Kofi", "Lucia"]


def shop(r: random.Random) -> str:
    n, p, d, t = r.randint(3, 12), r.randint(4, 60), r.choice([10, 15, 20, 25, 30]), r.choice([5, 7, 8, 19, 21])
    return (f"{r.choice(NAMES)} buys {n} notebooks at ${p} each and a backpack that costs {r.randint(2, 5)} times as "
            f"much as one notebook. The store takes {d}% off the whole purchase, then adds {t}% sales tax. "
            f"How much is paid in total?")


def trains(r: random.Random) -> str:
    v1, v2, gap, dist = r.randint(40, 90), r.randint(60, 140), r.choice([15, 20, 30, 45]), r.randint(150, 600)
    return (f"Two trains leave stations {dist} km apart and travel towards each other. The first leaves at 9:00 at "
            f"{v1} km/h; the second leaves {gap} minutes later at {v2} km/h. At what time do they meet, and how "
            f"far from the first station?")


def work(r: random.Random) -> str:
    a, b, c = r.randint(3, 9), r.randint(4, 12), r.randint(2, 5)
    return (f"One pump fills a tank in {a} hours and a second pump fills it in {b} hours. A drain empties the full "
            f"tank in {a + b + c} hours. If all three run together from empty, how long until the tank is full? "
            f"Give the answer in hours and minutes.")


def mixture(r: random.Random) -> str:
    v, c1, c2, target = r.randint(2, 20), r.choice([10, 15, 20]), r.choice([40, 50, 60]), r.choice([25, 30, 35])
    return (f"A chemist has {v} litres of a {c1}% acid solution. How many litres of a {c2}% solution must be added "
            f"to obtain a {target}% solution? Then, how much pure water would bring the result back down to {c1}%?")


FREQ = {1: "yearly", 4: "quarterly", 12: "monthly"}


def interest(r: random.Random) -> str:
    p, rate, years, k = r.randint(1, 50) * 1000, r.choice([2.5, 3, 3.75, 4.2, 5]), r.randint(2, 15), r.choice([1, 4, 12])
    return (f"An account starts with ${p} at an annual rate of {rate}% compounded {FREQ[k]} "
            f"for {years} years. Using $A = P\\left(1 + \\frac{{r}}{{n}}\\right)^{{nt}}$, find the final balance, the "
            f"interest earned, and how many more years it would take to double the original deposit.")


def ages(r: random.Random) -> str:
    a, k, y = r.randint(5, 15), r.randint(2, 4), r.randint(3, 12)
    return (f"{r.choice(NAMES)}'s mother is {k} times as old as {r.choice(NAMES)} is now. In {y} years the mother "
            f"will be {k * a + y} years old. How old is each of them now, and in how many years will the mother be "
            f"exactly twice as old as the child?")


def geometry(r: random.Random) -> str:
    w, l, b = r.randint(4, 20), r.randint(6, 30), r.choice([0.5, 1, 1.5, 2])
    return (f"A rectangular garden is {w} m by {l} m. A path {b} m wide runs all the way around the outside. Find "
            f"the area of the path, the cost of paving it at ${r.randint(20, 90)} per m^2, and the length of fence "
            f"needed around the outer edge.")


def probability(r: random.Random) -> str:
    red, blue, green, k = r.randint(2, 9), r.randint(2, 9), r.randint(1, 6), r.randint(2, 3)
    return (f"A bag holds {red} red, {blue} blue and {green} green marbles. {k} marbles are drawn without "
            f"replacement. What is the probability that they are all the same colour? What is the probability that "
            f"at least one is green? Express the answers as fractions in lowest terms.")


def ratio(r: random.Random) -> str:
    a, b, c, total = r.randint(1, 5), r.randint(2, 7), r.randint(1, 4), r.randint(20, 200) * 10
    return (f"Three friends share ${total} in the ratio {a}:{b}:{c}. The one with the largest share then gives a "
            f"quarter of it to the one with the smallest share. How much does each person have now, and what is "
            f"the new ratio in simplest form?")


def algebra(r: random.Random) -> str:
    a, b, c = r.randint(1, 9), r.randint(-20, 20), r.randint(-30, 30)
    return (f"Solve for $x$: ${a}x^2 {'+' if b >= 0 else '-'} {abs(b)}x {'+' if c >= 0 else '-'} {abs(c)} = 0$. "
            f"State the discriminant, whether the roots are real, and give exact and decimal values. Then find the "
            f"vertex of $y = {a}x^2 {'+' if b >= 0 else '-'} {abs(b)}x {'+' if c >= 0 else '-'} {abs(c)}$.")


def rates(r: random.Random) -> str:
    km, l100, price, trips = r.randint(8, 60), r.choice([4.5, 5.8, 6.5, 7.2, 9.1]), r.choice([1.62, 1.79, 1.85, 1.94]), r.randint(3, 6)
    return (f"{r.choice(NAMES)} drives {km} km to work and back {trips} days a week. The car uses {l100} litres per "
            f"100 km and fuel costs ${price} per litre. How much is spent on fuel in a 4-week month? A monthly "
            f"train pass costs ${r.randint(60, 200)}: which option is cheaper, and by how much per year?")


PROBLEMS = [shop, trains, work, mixture, interest, ages, geometry, probability, ratio, algebra, rates]
ASKS = ["", " Show each step.", " Explain your reasoning step by step, then give the final answer on its own line.",
        " Check your answer at the end.", " Put the final answer in \\boxed{}."]
SYSTEMS = [None, "You are a patient maths tutor. Work step by step.", "Solve the problem. Be concise but show the working."]


def make(rng: random.Random) -> tuple[list[dict], int]:
    k = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    probs = [f(rng) for f in rng.sample(PROBLEMS, k)]
    text = probs[0] if k == 1 else "Solve these problems:\n\n" + "\n\n".join(f"({i + 1}) {p}" for i, p in enumerate(probs))
    messages = []
    system = rng.choice(SYSTEMS)
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": text + rng.choice(ASKS)})
    if rng.random() < 0.15:
        messages += [{"role": "assistant", "content": "Here is a first attempt; I set up the equations and solved them."},
                     {"role": "user", "content": "I got a different number for the second part. Can you double-check it "
                                                 "and explain where the difference could come from?"}]
    return messages, rng.randint(200, 450) + 200 * (k - 1)
