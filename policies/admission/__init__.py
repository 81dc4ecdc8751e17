"""The admission decisions: what the webhook and `gangkeeper check` answer for an object.

    decision.py   `decide_pod`, `validate_object`: the two entry points
    mutation.py   `plan_pod` -> `MutationPlan`: how a gang pod is marked
    plan_memo.py  `PlanMemo`: plans remembered per pod shape

Pure. May import: `recognizers`, `fit`, `cluster`, `settings` and the root vocabulary.
The I/O around them is `webhook.server`'s.
"""
