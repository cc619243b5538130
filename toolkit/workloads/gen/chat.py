"""Chat prompts: open multi-turn conversation (advice, plans, opinions, creative writing, small talk)."""

from __future__ import annotations

import random

OPENERS = [
    ("I just moved to a new city and don't know anyone yet. How do people usually make friends as adults?",
     "Moving somewhere new can feel lonely at first. Clubs, classes and volunteering give you repeated contact "
     "with the same people, which is how most friendships start."),
    ("Can you help me plan a relaxed weekend with my parents? They like gardens and good food but get tired easily.",
     "Of course! A slow morning in a botanical garden, a long lunch somewhere quiet, and an early dinner at home "
     "would keep the pace gentle."),
    ("I keep putting off going to the gym. Any tips that actually work?",
     "Start smaller than feels useful: ten minutes, three times a week, at a fixed time. Consistency matters more "
     "than intensity at the beginning."),
    ("What should I cook tonight? I have rice, spinach, eggs, a lemon and some feta.",
     "You could make a lemony spinach rice with feta crumbled on top and a fried egg. It takes about twenty "
     "minutes."),
    ("I'm thinking about asking for a raise but I'm nervous. How should I bring it up?",
     "Ask for a short meeting, come with two or three concrete results you delivered, and name the figure you "
     "have in mind. Practising it out loud once helps a lot."),
    ("Write me a short poem about the first cold morning of autumn.",
     "Frost on the railing, breath in the air, / the kettle hums softly, the trees standing bare."),
    ("My sister and I argued about holiday plans and now we're not talking. How do I fix this?",
     "Reaching out first is often the hardest and most useful step. Acknowledge her side before explaining yours."),
    ("I want to read more this year. Can you suggest a few novels that are gripping but not too long?",
     "Sure. Short, tense novels are a great way back into reading; pick one mystery, one adventure and one "
     "literary novel to see what sticks."),
    ("Help me write a toast for my best friend's wedding. We met at summer camp when we were twelve.",
     "What a lovely start to a story! Open with the camp memory, add one funny moment, and end with a warm wish "
     "for the couple."),
    ("Do you think it's worth learning a musical instrument in your thirties?",
     "Absolutely. Adults often progress faster at first because they practise deliberately. The piano and the "
     "ukulele are friendly starting points."),
    ("I'm burned out at work. I don't even enjoy my weekends anymore.",
     "That sounds exhausting, and it's good that you noticed. Can you tell me what a typical week looks like "
     "right now?"),
    ("Let's brainstorm names for my new bakery. It's small, cosy, and we specialise in sourdough.",
     "Fun! A few directions: warm and homely, playful with bread words, or named after your street."),
]

FOLLOWUPS = [
    "That helps, thanks. But what if I only have the evenings free?",
    "Hmm, I tried something like that before and it didn't stick. What else could I do?",
    "Can you make it a bit more specific to me? I'm quite shy.",
    "Nice! Could you give me three more options, with a sentence on each?",
    "Okay, and how would you handle it if the other person gets upset?",
    "Honestly I'm not sure. What would you do in my place?",
    "Make it funnier, and shorter please.",
    "That sounds good. Can you turn it into a simple plan for the next two weeks?",
    "Thanks. One more question: how do I stay motivated when it gets boring?",
    "Great, now write it in a warmer tone, like you're talking to a friend.",
]

REPLIES = [
    "Good question. Evenings work fine; pick one fixed evening and protect it like an appointment.",
    "That's fair. Sometimes the method matters less than making it easy: lower the bar and remove friction.",
    "Of course. Being shy is common; start with settings where there is a shared activity, so talk comes naturally.",
    "Here are three: one quick, one more social, one you can do alone at home.",
    "Stay calm, listen first, and repeat back what you heard before answering.",
    "If I were you, I'd try the smallest version first and see how it feels after a week.",
]

CHATTY = [
    "Hey! How's your day going?", "I'm bored. Tell me something interesting.",
    "What's a good way to spend a rainy Sunday?", "Do you have a favourite season? I love spring.",
    "Give me a pep talk, I have an interview tomorrow.", "What's a nice gift for someone who has everything?",
    "Tell me a short bedtime story about a fox who is afraid of the dark.",
    "I can't decide between a cat and a dog. Help me think it through?",
]

STORY = [
    "Last month my best friend moved abroad for a new job, and our weekly dinners stopped overnight.",
    "I started a pottery class to fill the evenings, which I enjoy more than I expected.",
    "My partner thinks I should take the promotion, but it means a longer commute and less time at home.",
    "On weekends I mostly stay in, read, and cook something slow, and I like that rhythm.",
    "My manager keeps adding small tasks on Friday afternoons, and I never say no.",
    "I have been sleeping badly since the clocks changed, and my mornings feel heavy.",
    "My neighbour invited me to join her running group, but I'm worried I'll be the slowest.",
    "I'd love to travel more, but planning trips makes me anxious and I end up staying home.",
    "We adopted a rescue dog in spring; he's sweet but barks whenever we leave the flat.",
    "My brother and I used to be close, but we only talk on birthdays now.",
]
STORY_ASKS = ["What do you make of all this? Where would you start?",
              "Can you help me sort out what matters most here and what to do this week?",
              "I don't need solutions, just an honest opinion: am I overthinking it?"]

SYSTEMS = [None, "You are a friendly, thoughtful assistant. Keep answers warm and practical.",
           "You are a helpful companion. Ask a clarifying question when the request is vague."]


def make(rng: random.Random) -> tuple[list[dict], int]:
    messages: list[dict] = []
    system = rng.choice(SYSTEMS)
    if system:
        messages.append({"role": "system", "content": system})
    if rng.random() < 0.2:
        messages.append({"role": "user", "content": rng.choice(CHATTY)})
        return messages, rng.randint(80, 300)
    if rng.random() < 0.15:
        story = " ".join(rng.sample(STORY, rng.randint(4, len(STORY))))
        messages.append({"role": "user", "content": f"Okay, some context first. {story} {rng.choice(STORY_ASKS)}"})
        return messages, rng.randint(200, 600)
    opener, answer = rng.choice(OPENERS)
    messages.append({"role": "user", "content": opener})
    turns = rng.choices([0, 1, 2, 3, 4], weights=[2, 3, 3, 2, 1])[0]
    if turns:
        messages.append({"role": "assistant", "content": answer})
        for i in range(turns):
            messages.append({"role": "user", "content": rng.choice(FOLLOWUPS)})
            if i < turns - 1:
                messages.append({"role": "assistant", "content": rng.choice(REPLIES)})
    return messages, rng.randint(120, 500)
