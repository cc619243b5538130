"""Encyclopedic prompts: factual questions and explanations across science, history, geography, arts.

The short notes attached to some prompts were written for this project as plain background; the
model is asked to explain, compare, or expand them.
"""

from __future__ import annotations

import random

# topic -> background notes (one or more sentences, written for this project)
TOPICS = {
    "photosynthesis": "Plants, algae and cyanobacteria capture light with chlorophyll. Water is split and oxygen is "
                      "released. The Calvin cycle fixes carbon dioxide into sugars.",
    "plate tectonics": "The lithosphere is broken into plates that move a few centimetres a year. Mountains, "
                       "earthquakes and ocean trenches form at plate boundaries.",
    "the French Revolution": "It began in 1789 with the meeting of the Estates-General and the storming of the "
                             "Bastille. The monarchy was abolished in 1792.",
    "the printing press": "Johannes Gutenberg introduced movable metal type in Mainz around 1450. Printed books "
                          "spread quickly across Europe in the following decades.",
    "the immune system": "Innate immunity responds quickly and broadly. Adaptive immunity uses B cells and T cells "
                         "and keeps a memory of earlier infections.",
    "the Silk Road": "A network of trade routes linked China with Central Asia, Persia and the Mediterranean. "
                     "Silk, spices, paper and ideas travelled along it for centuries.",
    "black holes": "A black hole is a region where gravity prevents even light from escaping. Stellar black holes "
                   "form when massive stars collapse; supermassive ones sit at the centres of galaxies.",
    "the Roman Republic": "Rome was governed by elected magistrates and a senate from about 509 BC. Civil wars in "
                          "the first century BC ended with the rise of Augustus.",
    "the water cycle": "Water evaporates from oceans and lakes, condenses into clouds and returns as rain or snow. "
                       "Rivers and groundwater carry it back to the sea.",
    "the Meiji Restoration": "In 1868 imperial rule was restored in Japan. The new government abolished the feudal "
                             "domains and built railways, schools and a modern army.",
    "antibiotics": "Alexander Fleming noticed in 1928 that a mould killed bacteria, which led to penicillin. "
                   "Overuse has made many bacteria resistant.",
    "the Amazon rainforest": "It covers much of the Amazon basin across nine countries. It holds a large share of "
                             "the world's species and influences rainfall far beyond its edges.",
    "the Renaissance": "It began in Italian city-states in the fourteenth century. Artists such as Leonardo and "
                       "Michelangelo drew on classical models, supported by wealthy patrons.",
    "DNA": "DNA is a double helix of two strands held together by base pairs. Its sequence of bases carries "
           "genetic information that cells copy and translate into proteins.",
    "the Industrial Revolution": "It started in Britain in the late eighteenth century. Steam power, textile "
                                 "mills and railways changed work, cities and trade.",
    "volcanoes": "Magma rises through the crust and erupts as lava, ash and gas. Some volcanoes form at plate "
                 "boundaries, others over hot spots such as Hawaii.",
    "the Ottoman Empire": "Founded around 1300 in Anatolia, it took Constantinople in 1453. At its height it "
                          "spanned parts of three continents; it ended after the First World War.",
    "the Great Barrier Reef": "It lies off the coast of Queensland, Australia, and is the largest coral reef "
                              "system. Warming seas cause bleaching events.",
    "vaccination": "Edward Jenner used cowpox to protect against smallpox in the 1790s. Smallpox was declared "
                   "eradicated in 1980.",
    "the Mongol Empire": "Genghis Khan united the Mongol tribes in 1206. His successors ruled from Korea to "
                         "Eastern Europe, the largest contiguous land empire.",
    "impressionism": "Painters in France in the 1870s, among them Monet and Renoir, worked outdoors and "
                     "tried to capture light and passing moments.",
    "the Moon landing": "Apollo 11 landed on the Moon in July 1969. Neil Armstrong and Buzz Aldrin walked on "
                        "the surface while Michael Collins orbited above.",
    "the Nile": "The Nile flows north into the Mediterranean. Its yearly floods made the fertile farmland that "
                "supported ancient Egyptian civilisation.",
    "the Cold War": "After 1945 the United States and the Soviet Union competed for influence without fighting "
                    "each other directly. It ended with the collapse of the Soviet Union in 1991.",
    "the theory of evolution": "Charles Darwin and Alfred Russel Wallace proposed natural selection. Darwin's "
                               "book on the origin of species appeared in 1859.",
    "the Inca Empire": "The Incas ruled a large state in the Andes from Cusco. They built roads across mountains "
                       "and kept records with knotted cords called quipu.",
    "earthquakes": "Stress builds up along faults and is released suddenly as seismic waves. Their size is "
                   "measured on the moment magnitude scale.",
    "the Hanseatic League": "It was an alliance of merchant guilds and market towns in northern Europe. Lübeck "
                            "was its leading city.",
    "climate zones": "Climates are grouped by temperature and rainfall into tropical, dry, temperate, "
                     "continental and polar zones.",
    "the Byzantine Empire": "It was the eastern continuation of the Roman Empire with its capital at "
                            "Constantinople, and it lasted until 1453.",
    "the human heart": "The heart has four chambers. The right side pumps blood to the lungs and the left side "
                       "pumps it to the rest of the body.",
    "the Sahara": "It is the largest hot desert, covering much of North Africa. Thousands of years ago parts of "
                  "it were green with lakes and grassland.",
    "Baroque music": "It flourished from about 1600 to 1750. Bach, Handel and Vivaldi are among its best-known "
                     "composers.",
    "the Gutenberg Bible": "It was one of the first major books printed in Europe with movable type, in the "
                           "1450s. Fewer than fifty copies survive.",
    "the ozone layer": "Ozone in the stratosphere absorbs most ultraviolet light from the Sun. The Montreal "
                       "Protocol of 1987 phased out many of the chemicals that damaged it.",
    "the Aztec capital Tenochtitlan": "It was built on an island in Lake Texcoco. Causeways linked it to the "
                                      "shore, and Mexico City stands on its site today.",
}

PEOPLE = ["Marie Curie", "Ibn Battuta", "Ada Lovelace", "Nelson Mandela", "Leonardo da Vinci", "Hypatia",
          "Mansa Musa", "Isaac Newton", "Frida Kahlo", "Zheng He", "Rosalind Franklin", "Simon Bolivar",
          "Murasaki Shikibu", "Nikola Tesla", "Wangari Maathai", "Charlemagne"]

QUESTIONS = [
    "Explain {t} to someone with no background in the subject.",
    "What is {t}, and why does it matter today?",
    "Give an overview of {t}: origins, key developments and lasting influence.",
    "What are the most common misconceptions about {t}?",
    "Write an encyclopedia-style entry on {t}, with sections.",
    "Summarise what historians or scientists currently agree on about {t}, and where they still disagree.",
    "What were the main causes and consequences of {t}?",
    "Describe {t} in three paragraphs for a school textbook.",
]
COMPARE = [
    "Compare {a} and {b}. What do they have in common, and how do they differ?",
    "How is {a} related to {b}, if at all?",
]
PERSON = [
    "Who was {p}, and what is {p} best known for?",
    "Give a short biography of {p} and explain why {p} is still remembered.",
    "What were the main achievements of {p}, and what was the historical context?",
]
NOTES = [
    "I am studying {t}. My notes say: \"{n}\" Expand on this with more detail, key dates and figures.",
    "Here is a paragraph from my revision sheet on {t}:\n\n{n}\n\nIs it accurate? Correct anything that is wrong and "
    "add what is missing.",
    "Background on {t}: {n}\n\nUsing this as a starting point, explain the topic in depth and add related topics to read.",
]


ARTICLE = ("I am writing a long reference article for a general audience. Below are my research notes, one "
           "paragraph per topic. Turn them into a well-organised article with an introduction, one section per "
           "topic, the connections between the topics, and a short list of further reading.\n\n{notes}")


def make(rng: random.Random) -> tuple[list[dict], int]:
    kind = rng.choices(["question", "compare", "person", "notes", "multi", "article"], weights=[4, 2, 2, 3, 1, 1])[0]
    topics = list(TOPICS)
    if kind == "question":
        text = rng.choice(QUESTIONS).format(t=rng.choice(topics))
    elif kind == "compare":
        a, b = rng.sample(topics, 2)
        text = rng.choice(COMPARE).format(a=a, b=b)
    elif kind == "person":
        text = rng.choice(PERSON).format(p=rng.choice(PEOPLE))
    elif kind == "notes":
        picked = rng.sample(topics, rng.randint(1, 4))
        notes = " ".join(TOPICS[t] for t in picked)
        text = rng.choice(NOTES).format(t=picked[0], n=notes)
    elif kind == "article":
        picked = rng.sample(topics, rng.randint(6, 16))
        notes = "\n\n".join(f"{t[0].upper() + t[1:]}: {TOPICS[t]}" for t in picked)
        return [{"role": "user", "content": ARTICLE.format(notes=notes)}], rng.randint(700, 1500)
    else:
        picked = rng.sample(topics, rng.randint(3, 7))
        lines = "\n".join(f"{i + 1}. {rng.choice(QUESTIONS).format(t=t)}" for i, t in enumerate(picked))
        text = f"Answer each of these briefly, one paragraph each:\n{lines}"
    messages = [{"role": "user", "content": text}]
    if rng.random() < 0.2:
        messages.insert(0, {"role": "system", "content": "You are a knowledgeable, neutral reference assistant."})
    return messages, rng.randint(200, 700)
